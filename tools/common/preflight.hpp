#pragma once
// Checks made before a run does any work, so that it fails at once with one line rather
// than after hours, and never destroys a file:
//   check_outputs: every output (--save, --metrics, --plot, --attention-png) can be
//     written: not a folder, device or reader-less FIFO where a file goes, a name the
//     folder allows, in a folder that can be written; no two outputs name the same file,
//     and none names an input (--text, --init-from, --resume; except --save, which
//     updates the resumed checkpoint in place). An existing --save file is replaced only
//     when it is a checkpoint of xgrad-train for the same task (or empty).
//   check_output_file: one output as check_outputs checks each, for other tools
//     (xgrad-bench --profile); an existing file is replaced only when it opens with one of
//     `openings` (it holds `kind`).
//   check_memory: the run's estimated memory, in each of the `ranks_here` processes on
//     this machine, fits it (RAM, cgroup limit, address-space limit); otherwise the
//     message names the flags that need it. `text_bytes`: the --text held in memory.

#include <initializer_list>
#include <string_view>

#include "config.hpp"

namespace tools {

void check_outputs(const Config& config);
void check_output_file(const Flag& flag, const std::string& path, std::initializer_list<std::string_view> openings,
                       const char* kind);
void check_memory(const Config& config, int ranks_here, std::size_t text_bytes);

}  // namespace tools
