// What libxgrad sets up when it is loaded: after its dependencies (OpenBLAS, glibc) have
// started and before the program's main, so every program linked against libxgrad gets
// it without an environment variable or a call.
//
// - OpenBLAS: kernels of the CPU's vector class, one thread per call (autograd/blas.hpp).
// - glibc malloc: keep freed blocks of every size on the heap for reuse (no block is
//   mmap'ed on its own) and trim the heap only past 1 GiB free. A training step frees and
//   reallocates the same activations every step; with glibc's defaults each of them comes
//   back as fresh pages from the kernel. Page faults took 11% of a small model's step
//   (tiny 7.0 -> 5.0 ms, long 170 -> 148 ms with blocks up to 32 MiB kept), and two thirds
//   of a GPT-2 124M step, whose logits and embedding gradient are larger (AMD EPYC Zen 5
//   VM: bf16 1,386 -> 558 ms, float32 1,684 -> 822 ms, the same peak memory).
//   MALLOC_MMAP_THRESHOLD_, MALLOC_MMAP_MAX_, MALLOC_TRIM_THRESHOLD_ or MALLOC_TOP_PAD_ in
//   the environment leave malloc as the user set it.
// - Transparent huge pages for that heap, marked as it grows (heap.cpp says why);
//   XGRAD_HUGE_PAGES=0 leaves it in the kernel's default pages.

#include <malloc.h>

#include <cstdlib>

#include "xgrad/autograd/detail/blas.hpp"
#include "xgrad/autograd/detail/heap.hpp"

namespace xgrad {

namespace {

void keep_freed_memory_for_reuse() {
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"})
    if (std::getenv(name)) return;
  mallopt(M_MMAP_MAX, 0);  // glibc still maps what its heap cannot grow to hold
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // Grow the heap 64 MiB past each request (address space only, until written): most of a
  // growth is then untouched when advise_heap_growth marks it, so it faults in huge pages.
  mallopt(M_TOP_PAD, 64 << 20);
}

[[maybe_unused]] const bool kStarted = [] {
  detail::select_blas_kernels();
  detail::run_blas_single_threaded();
  keep_freed_memory_for_reuse();
  detail::start_heap_advice();
  return true;
}();

}  // namespace

}  // namespace xgrad
