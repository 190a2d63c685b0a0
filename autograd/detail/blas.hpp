#pragma once
// Internal: how libxgrad sets OpenBLAS up when it is loaded (autograd/startup.cpp), and
// what the tests use to put it in other states.

#include <string>

#include "xgrad/autograd/blas.hpp"

namespace xgrad {

namespace detail {
// Switches OpenBLAS to the kernels named `core`, as OPENBLAS_CORETYPE would at load time;
// returns false when this OpenBLAS cannot (not a DYNAMIC_ARCH build). Only safe before
// any other thread calls BLAS.
bool force_blas_core(const std::string& core);
// The start-up check: replaces kernels below the CPU's class (blas.hpp). Returns what it
// did, which blas_summary() also reports.
std::string select_blas_kernels();
// One thread per call: OpenBLAS's own threads would compete with xgrad's pool, which
// splits the large products itself (OpenBLAS's own threads are stopped).
void run_blas_single_threaded();
}  // namespace detail

}  // namespace xgrad
