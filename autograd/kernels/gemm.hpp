#pragma once
// Row-major GEMM through OpenBLAS's CBLAS:
//   C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C
// where op(X) is X or X transposed; lda/ldb/ldc are the row strides as stored.

#include <cstddef>

namespace xgrad::kernels {

template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a, std::size_t lda,
          const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc);

}  // namespace xgrad::kernels
