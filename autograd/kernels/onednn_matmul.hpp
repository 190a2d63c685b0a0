#pragma once
// bfloat16 x bfloat16 -> float32 products through oneDNN's matmul primitive (its brgemm
// kernels for AVX512_BF16 and AMX), one primitive per product shape and thread, made on
// first use and kept: the per-call cost of oneDNN's gemm API, which packs both operands
// every call, halves the rate of attention's small block products.

#include <cstddef>
#include <string>

#include "xgrad/autograd/bfloat16.hpp"

namespace xgrad::kernels {

// C = alpha (op(A) op(B) + bias) + beta C, row-major as cblas_sgemm, bias a row of n values
// (or null; oneDNN 2's output scale applies to it too), on the calling thread (run it under
// one OpenMP thread). Returns false, doing
// nothing, where oneDNN has no brgemm kernel for the shape on this CPU: the caller then
// uses oneDNN's gemm API.
bool onednn_matmul(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
                   const bfloat16* a, std::size_t lda, const bfloat16* b, std::size_t ldb, float beta, float* c,
                   std::size_t ldc, const float* bias);

// The kernel oneDNN's matmul primitive picks for bf16 products on this CPU, as oneDNN names
// it: "brg:avx512_core_amx_bf16" (AMX tiles), "brg:avx512_core_bf16" (AVX512_BF16 dot
// products), or another implementation's name where it has no brgemm kernel. Asked once.
const std::string& onednn_bf16_kernel();

}  // namespace xgrad::kernels
