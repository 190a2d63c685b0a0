#pragma once
// The BLAS under xgrad's matrix products: OpenBLAS, one thread per call (xgrad's pool
// splits large products), with the kernels the CPU actually supports. libxgrad sets
// both when it is loaded (autograd/startup.cpp); a program that calls OpenBLAS itself
// gets the same settings.
//
// Debian's OpenBLAS 0.3.21 picks its kernels once, when it is loaded, and falls back to
// Prescott (SSE3) kernels on CPUs it does not know (recent Intel and AMD server parts),
// 5-8x below the machine. When libxgrad is loaded (before main, in every program linked
// against it) it compares OpenBLAS's choice with the CPU: if OpenBLAS chose kernels below
// what the CPU runs, it switches OpenBLAS to SkylakeX kernels (AVX-512) or Haswell
// kernels (AVX2 + FMA). A CPU that OpenBLAS recognises, or an OPENBLAS_CORETYPE set by
// the user, is left alone (a name OpenBLAS does not know is reported, then treated as
// unset).

#include <string>

namespace xgrad {

// OpenBLAS's name for the kernels in use ("SkylakeX", "Haswell", "Zen", "Prescott", ...).
std::string blas_core();
// OpenBLAS's threads per call: 1 (xgrad's pool does the splitting).
int blas_threads_per_call();
// One line for logs: library, build, kernels, and why, e.g.
// "OpenBLAS 0.3.21 pthreads, SkylakeX kernels (chosen by xgrad: OpenBLAS picked Prescott)".
std::string blas_summary();
// Who chose the kernels in use: "user" (OPENBLAS_CORETYPE), "xgrad" (the start-up check
// replaced kernels below the CPU) or "OpenBLAS" (its own detection).
std::string blas_core_chosen_by();
// The kernel class the CPU supports best: "avx512", "avx2" or "baseline".
std::string cpu_vector_class();
// Whether `core` (an OpenBLAS core name) uses the CPU's best vector class.
bool blas_core_fits_cpu(const std::string& core);

}  // namespace xgrad
