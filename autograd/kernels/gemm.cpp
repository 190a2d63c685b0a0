#include "autograd/kernels/gemm.hpp"

#include <cblas.h>

namespace xgrad::kernels {

namespace {
CBLAS_TRANSPOSE flag(bool transposed) { return transposed ? CblasTrans : CblasNoTrans; }
blasint as_int(std::size_t v) { return static_cast<blasint>(v); }
}  // namespace

template <>
void gemm<float>(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
                 const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta,
                 float* c, std::size_t ldc) {
  cblas_sgemm(CblasRowMajor, flag(trans_a), flag(trans_b), as_int(m), as_int(n), as_int(k), alpha, a,
              as_int(lda), b, as_int(ldb), beta, c, as_int(ldc));
}

template <>
void gemm<double>(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
                  double alpha, const double* a, std::size_t lda, const double* b, std::size_t ldb,
                  double beta, double* c, std::size_t ldc) {
  cblas_dgemm(CblasRowMajor, flag(trans_a), flag(trans_b), as_int(m), as_int(n), as_int(k), alpha, a,
              as_int(lda), b, as_int(ldb), beta, c, as_int(ldc));
}

}  // namespace xgrad::kernels
