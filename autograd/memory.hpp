#pragma once
// How much memory this process can have, the one answer to "does this fit?": the
// library's allocation guard (new_array) and the tools' checks before a run both ask it.

#include <cstddef>

namespace xgrad {

// The machine's RAM and swap, capped by this process's cgroup limit (memory.max) and its
// address-space limit (RLIMIT_AS). Read once.
std::size_t usable_memory_bytes();

// Whether the address-space limit is what caps it: then memory reserved and never touched
// (a thread's stack, an allocator's arena, a library's buffer mapped whole) counts too.
bool address_space_limited();

}  // namespace xgrad
