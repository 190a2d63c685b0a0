#include "autograd/threads.hpp"

#include <cblas.h>
#include <omp.h>

#include <string>

#include "autograd/tensor.hpp"

namespace xgrad {

void set_num_threads(int threads) {
  if (threads < 1) throw Error("set_num_threads: " + std::to_string(threads) + " threads; need at least 1");
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

int num_threads() { return omp_get_max_threads(); }

const char* blas_config() { return openblas_get_config(); }

bool blas_uses_openmp() { return openblas_get_parallel() == 2; }  // OpenBLAS: 0 serial, 1 pthreads, 2 OpenMP

}  // namespace xgrad
