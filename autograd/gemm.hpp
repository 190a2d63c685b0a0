#pragma once
// Matrix products on raw row-major buffers, run as xgrad's own ops run theirs: for code
// that works on buffers itself (a CustomOp's forward and backward, a benchmark).
//
//   C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C
//
// op(X) is X, or X transposed when trans_x is set; lda, ldb and ldc are the row strides
// as stored. A large product is cut into panels fixed by its shape alone, which the
// pool's threads share (autograd/parallel.hpp), so the result is the same bits on any
// number of threads; each panel is one OpenBLAS call (float, double) or oneDNN call
// (bfloat16 operands).

#include <cstddef>

#include "xgrad/autograd/bfloat16.hpp"

namespace xgrad {

// float or double.
template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a, std::size_t lda,
          const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc);

// The same product with bfloat16 operands, accumulated and written in float32 (beta and
// C too): the mixed-precision product (autograd/precision.hpp). A bias (n values, or
// null) is added to every row of C as the product is written.
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const bfloat16* a,
          std::size_t lda, const bfloat16* b, std::size_t ldb, float beta, float* c, std::size_t ldc,
          const float* bias = nullptr);

}  // namespace xgrad
