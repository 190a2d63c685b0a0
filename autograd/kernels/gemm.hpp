#pragma once
// Row-major GEMM through OpenBLAS's CBLAS:
//   C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C
// where op(X) is X or X transposed; lda/ldb/ldc are the row strides as stored.

#include <cstddef>
#include <string>

#include "xgrad/autograd/kernels/bfloat16.hpp"

namespace xgrad::kernels {

template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a, std::size_t lda,
          const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc);

// The same product with bfloat16 operands, accumulated and written in float32 (beta and
// C too): the mixed-precision product (autograd/precision.hpp). Cut into the same
// shape-fixed panels, so the same bits on any thread count. A bias (n values, or null) is
// added to every row of C as the product is written: linear's, with no pass of its own.
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const bfloat16* a,
          std::size_t lda, const bfloat16* b, std::size_t ldb, float beta, float* c, std::size_t ldc,
          const float* bias = nullptr);

// What runs bfloat16 products on this CPU, chosen once: oneDNN with native bf16 dot
// products (AVX512_BF16, AMX), or OpenBLAS's sgemm on the operands widened to float32
// (any other CPU: on AVX-512 without AVX512_BF16 this runs the medium model twice as fast
// as oneDNN's emulated bf16). oneDNN's DNNL_MAX_CPU_ISA caps it. Each gives its own bits
// (its own summation order), each deterministic.
enum class Bf16Path { kOneDnnNative, kWidened };
Bf16Path bf16_path();
std::string bf16_path_name();  // e.g. "oneDNN 2.6.3, native bf16 dot products (AVX512_BF16)"

}  // namespace xgrad::kernels
