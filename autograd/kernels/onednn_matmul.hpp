#pragma once
// bfloat16 x bfloat16 -> float32 products through oneDNN's matmul primitive (its brgemm
// kernels for AVX512_BF16 and AMX), one primitive per product shape and thread, made on
// first use and kept: the per-call cost of oneDNN's gemm API, which packs both operands
// every call, halves the rate of attention's small block products.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "xgrad/autograd/bfloat16.hpp"

namespace xgrad::kernels {

// A float32 weight matrix rounded to bfloat16 once, read by every product until its values
// change, with the copies of it that oneDNN's primitive reads as its B operand in the
// blocked layout it asks for. Given a plain matrix, the primitive repacks B on every call
// (its "copy_B"), and a product cut into row panels repacks it once per panel; a blocked
// copy is made once (a reorder), by the first product that reads that panel and layout
// blocked, and kept here. Thread-safe.
//
// Whether a product reads the weight blocked is its caller's choice (WeightRead, gemm.hpp),
// and pays only for a weight many products read at one version: the reorder costs more
// than the repacking it saves in one product. On AVX512_BF16 copy_B is about 5% of a
// product and overlaps its arithmetic, while the reorder takes 2-3 times as long (0.3 ns
// an element, Zen 5). On AMX a blocked 256 x 768 x 768 product is 13% faster than a plain
// one, but its reorder costs 46% of it (Xeon, one thread); blocking a training step's
// products made GPT-2 124M's bf16 step 20% slower there (699 -> 558 ms without, medians
// of five). Read many times it saves the repacking every later call: 1 x 768 x 50,257 (a
// generated token's logits) 6.7 -> 4.0 ms on AMX, 17 x 768 x 50,257 8.5 -> 5.0 ms on Zen 5.
//
// On AVX512_BF16 the primitive computes the same bits from either layout. On AMX it need
// not: past about 1,000 terms (256 x 1,000 x 768, Xeon) it sums the blocked layout in
// other chunks than the plain one. So the choice is a fixed rule of the caller's, never a
// count of earlier reads: a product's bits do not depend on how often its weight was read
// before (by micro-batches of a step, or a recomputed forward).
class Bf16Weight {
 public:
  // values: rows x cols, row-major; version: the count of changes made to them so far.
  Bf16Weight(const float* values, std::size_t rows, std::size_t cols, std::uint64_t version);
  // The rounding made elsewhere (by an optimizer's update: Bf16RoundingRefresh), taken.
  Bf16Weight(std::unique_ptr<bfloat16[]> rounded, const float* values, std::size_t rows, std::size_t cols,
             std::uint64_t version);
  ~Bf16Weight();
  Bf16Weight(const Bf16Weight&) = delete;
  Bf16Weight& operator=(const Bf16Weight&) = delete;

  const bfloat16* data() const { return rounded_.get(); }
  std::size_t rows() const { return rows_; }
  std::size_t cols() const { return cols_; }
  // Whether this is the rounding of these values, unchanged since.
  bool made_from(const float* values, std::size_t rows, std::size_t cols, std::uint64_t version) const {
    return values == source_ && rows == rows_ && cols == cols_ && version == version_;
  }
  std::size_t blocked_copies() const;  // how many blocked copies have been made (for tests)

  struct Blocked;  // the blocked copies (onednn_matmul.cpp)
  Blocked& blocked() const { return *blocked_; }

 private:
  std::unique_ptr<bfloat16[]> rounded_;
  std::size_t rows_, cols_;
  const float* source_;
  std::uint64_t version_;
  std::unique_ptr<Blocked> blocked_;
};

// C = alpha (op(A) op(B) + bias) + beta C, row-major as cblas_sgemm, bias a row of n values
// (or null; oneDNN 2's output scale applies to it too), on the calling thread (run it under
// one OpenMP thread). Returns false, doing
// nothing, where oneDNN has no brgemm kernel for the shape on this CPU: the caller then
// uses oneDNN's gemm API. With `weight`, B lies inside weight->data() (B dense: ldb its
// row's length) and is read from a blocked copy kept with the weight.
bool onednn_matmul(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
                   const bfloat16* a, std::size_t lda, const bfloat16* b, std::size_t ldb, float beta, float* c,
                   std::size_t ldc, const float* bias, const Bf16Weight* weight = nullptr);

// `batch` products of one shape in one call, as onednn_matmul's without bias or weight:
// C_i = alpha op(A_i) op(B_i) + beta C_i, where A_i starts stride_a elements after
// A_(i-1) (B_i and C_i likewise). For many small products (attention's blocks at short
// sequences), whose calls cost more than their arithmetic: 24 products of 64 x 64 x 32
// at 0.81 us each against 2.06 us called one by one (Zen 5, one thread). Each product's
// bits do not depend on the batch it is in (oneDNN's kernel loops over the batch).
bool onednn_matmul_batched(std::size_t batch, bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
                           float alpha, const bfloat16* a, std::size_t lda, std::size_t stride_a, const bfloat16* b,
                           std::size_t ldb, std::size_t stride_b, float beta, float* c, std::size_t ldc,
                           std::size_t stride_c);

// The kernel oneDNN's matmul primitive picks for bf16 products on this CPU, as oneDNN names
// it: "brg:avx512_core_amx_bf16" (AMX tiles), "brg:avx512_core_bf16" (AVX512_BF16 dot
// products), or another implementation's name where it has no brgemm kernel. Asked once.
const std::string& onednn_bf16_kernel();

}  // namespace xgrad::kernels
