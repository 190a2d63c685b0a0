#pragma once
// Internal: the products the ops run (xgrad::gemm, public in autograd/gemm.hpp, is the
// product itself), and which kernels run bfloat16 products on this CPU.

#include <cstddef>
#include <functional>
#include <string>

#include "xgrad/autograd/gemm.hpp"
#include "xgrad/autograd/kernels/onednn_matmul.hpp"

namespace xgrad::kernels {

using xgrad::bfloat16;
using xgrad::gemm;
using xgrad::round_to_bfloat16;
using xgrad::to_bfloat16;
using xgrad::to_bfloat16_n;
using xgrad::to_float;

// How a product reads a weight (onednn_matmul.hpp): its plain rounding, repacked by the
// primitive as it goes, or the blocked copies the weight keeps, made by the first product
// that asks for a layout and reused by every later one. Blocked pays where many products
// read the weight at one version (a frozen weight, generation, evaluation), plain where
// one forward and one backward product do before it changes (a trained weight).
enum class WeightRead { plain, blocked };

// Work on a block of C once each of its elements is final, rows [row, row + rows) and
// columns [col, col + cols): called by the thread that finished it, right after, while
// the block is still in its cache (linear_relu's relu and its output's rounding, saving a
// pass over C from memory each). Blocks are disjoint; which ones depends on the product's
// cut, so the work must be elementwise.
using BlockEpilogue = std::function<void(std::size_t row, std::size_t rows, std::size_t col, std::size_t cols)>;

// xgrad::gemm's float and double product with an epilogue (null: none).
template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a, std::size_t lda,
          const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc, const BlockEpilogue* epilogue);

// xgrad::gemm's bf16 product with op(B) a weight (B = W, or W^T when trans_b), rounded once
// and, with WeightRead::blocked, read from its blocked copies where oneDNN's primitive
// takes the product (a dense B: the whole weight, or a panel of its rows).
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const bfloat16* a,
          std::size_t lda, const Bf16Weight& b, WeightRead read, float beta, float* c, std::size_t ldc,
          const float* bias = nullptr, const BlockEpilogue* epilogue = nullptr);

// How a bf16 product writes C where beta is 0: through the caches, or streamed past them,
// for a C read only long after (a weight's gradient, read next by the gradient norm and
// the optimizer once the whole backward has gone through memory). Streamed (where AMX
// runs the products, C is larger than an L2 and k at most 512; otherwise as cached: only
// a shallow product's time goes into writing C), each call runs in blocks of C's rows
// into a buffer the thread's L2 holds, copied out with streaming stores: other calls than
// cached, so possibly other bits, within the same bound and the same on any thread count.
enum class CStore { cached, streamed };

void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const bfloat16* a,
          std::size_t lda, const bfloat16* b, std::size_t ldb, float beta, float* c, std::size_t ldc, const float* bias,
          CStore store);

// `batch` bf16 products of one shape on the calling thread: C_i = alpha op(A_i) op(B_i) +
// beta C_i, where A_i starts stride_a elements after A_(i-1) (B_i, C_i likewise). One
// oneDNN call where its primitive takes them (onednn_matmul_batched), else gemm's product
// for each. A product's bits do not depend on the batch it is in.
void batched_gemm(std::size_t batch, bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
                  float alpha, const bfloat16* a, std::size_t lda, std::size_t stride_a, const bfloat16* b,
                  std::size_t ldb, std::size_t stride_b, float beta, float* c, std::size_t ldc, std::size_t stride_c);

// What runs bfloat16 products on this CPU, chosen once: oneDNN with native bf16 dot
// products (AVX512_BF16, AMX), or OpenBLAS's sgemm on the operands widened to float32
// (any other CPU: on AVX-512 without AVX512_BF16 this runs the medium model twice as fast
// as oneDNN's emulated bf16). oneDNN's DNNL_MAX_CPU_ISA caps it. Each gives its own bits
// (its own summation order), each deterministic.
enum class Bf16Path { kOneDnnNative, kWidened };
Bf16Path bf16_path();
std::string bf16_path_name();  // e.g. "oneDNN 2.6.3, brg:avx512_core_amx_bf16 (AMX tile products)"

// Whether bf16 products with strided operands run oneDNN's brgemm primitive on dense copies
// of them (on by default where that primitive runs AMX tiles; gemm.cpp says why). Not
// thread-safe: set it before products run (tests force it on elsewhere).
bool dense_copies_for_brgemm();
void set_dense_copies_for_brgemm(bool on);

}  // namespace xgrad::kernels
