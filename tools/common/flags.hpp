#pragma once
// The flags several programs take, each declared once: its name, what it takes, its range
// and what it means. A program's table binds them to its own fields with its own defaults
// (setting::bind), narrowing the range or saying what the flag means there when its use
// differs (xgrad-bench's --steps are timed steps, its --warmup untimed ones).

#include "settings.hpp"

namespace tools::flags {

// How work runs.
const Declaration& threads();
const Declaration& seed();
const Declaration& precision();
const Declaration& keep_denormals();
const Declaration& profile();
const Declaration& profile_steps();
// A transformer's shape and how it trains.
const Declaration& seq_len();
const Declaration& vocab();
const Declaration& d_model();
const Declaration& heads();
const Declaration& layers();
const Declaration& ff();
const Declaration& dropout();
const Declaration& batch();
const Declaration& recompute();
const Declaration& steps();
const Declaration& warmup();
// Text and its tokens.
const Declaration& text();
const Declaration& tokenizer();
// What a program writes.
const Declaration& out();

}  // namespace tools::flags

namespace tools::setting {
namespace flags = tools::flags;  // for the tables (settings.hpp)
}  // namespace tools::setting
