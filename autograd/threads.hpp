#pragma once
// How many threads xgrad's kernels (OpenMP) and matrix products (OpenBLAS) use. Results
// are deterministic for a given count.

namespace xgrad {

void set_num_threads(int threads);  // >= 1
int num_threads();

// The BLAS xgrad runs on (OpenBLAS's build description), and whether it is the OpenMP
// build that shares xgrad's thread pool.
const char* blas_config();
bool blas_uses_openmp();

}  // namespace xgrad
