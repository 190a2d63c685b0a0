#pragma once
// Internal: the profiler's hooks that only the library itself calls (autograd/hooks.cpp,
// the pool, the storage of op outputs).

#include <cstdint>
#include <string_view>

#include "xgrad/autograd/profile.hpp"

namespace xgrad::profile {

// The calling thread's innermost open event (a pool job's owner).
EventRef innermost();

// Names the innermost open event after `op` when it is an op's unnamed forward event (the
// one hooks::ForwardScope opened); `detail` describes the op's inputs (what the table
// groups by with by_shape), e.g. "[2, 3] float32, [3] float32 (bf16 products)".
void op_recorded(const char* op, std::string_view detail, std::int64_t output_bytes);

// Bytes of op outputs and gradients alive that were made while recording, and their peak.
// released() counts only for the recording that allocated (`session`).
std::uint64_t allocated(std::int64_t bytes);
void released(std::int64_t bytes, std::uint64_t session);

}  // namespace xgrad::profile
