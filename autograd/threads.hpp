#pragma once
// How many threads xgrad's kernels (OpenMP) and matrix products (OpenBLAS) use. Results
// are deterministic for a given count.

namespace xgrad {

void set_num_threads(int threads);  // >= 1
int num_threads();

}  // namespace xgrad
