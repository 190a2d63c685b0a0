#pragma once
// Fused scaled dot-product attention over a batch of independent problems (batch x
// heads), FlashAttention-2 style: keys are visited in blocks with an online softmax,
// only each query row's logsumexp is saved, and backward recomputes the probabilities
// block by block. Memory grows with the sequence lengths, never with their product
// (unless the caller asks for the weights).

#include <cstddef>
#include <cstdint>
#include <vector>

namespace xgrad::kernels {

// A mask broadcast to [Lq, Lk] for every batch: element (b, i, j) sits at
// batch_offset[b] + i * row_stride + j * col_stride (strides are 0 where it broadcasts).
template <class V>
struct BroadcastMask {
  const V* data = nullptr;  // null: no mask
  std::vector<std::size_t> batch_offset;
  std::size_t row_stride = 0, col_stride = 0;

  V at(std::size_t b, std::size_t i, std::size_t j) const {
    return data[batch_offset[b] + i * row_stride + j * col_stride];
  }
};

// Where the rows of each batch entry's matrix sit in a buffer: row i of entry b starts at
// offset[b] + i * stride. Heads read in place from a projection [N, L, H * d] are rows of
// stride H * d (3 * H * d for a fused QKV projection) at offsets n * L * stride + h * d.
struct BatchRows {
  std::vector<std::size_t> offset;
  std::size_t stride = 0;

  std::size_t at(std::size_t b, std::size_t i) const { return offset[b] + i * stride; }
  // Entry b is the dense [rows, width] block b / group of a contiguous array.
  static BatchRows dense(std::size_t batches, std::size_t rows, std::size_t width, std::size_t group = 1);
};

template <class T>
struct AttentionProblem {
  std::size_t batches = 0, lq = 0, lk = 0, dk = 0, dv = 0;
  const T* q = nullptr;  // q[b] is [lq, dk], k[b] [lk, dk], v[b] [lk, dv], at their rows
  const T* k = nullptr;
  const T* v = nullptr;
  BatchRows q_rows, k_rows, v_rows;
  BatchRows out_rows;                   // the output [lq, dv] of each entry, and its gradient
  BatchRows dq_rows, dk_rows, dv_rows;  // where backward writes the input gradients
  BroadcastMask<std::uint8_t> keep;     // nonzero = may attend
  BroadcastMask<T> bias;                // added to the scores
  bool causal = false;                  // query i sees keys j <= i
  std::size_t window = 0;               // with causal: only keys j > i - window (0: all)
  T scale = 1;
  double dropout_p = 0;            // on the probabilities, inverted scaling
  std::uint64_t dropout_seed = 0;  // the mask is a hash of (seed, b, i, j)
  bool bf16 = false;               // float32 only: block products on bfloat16 operands (autocast)
  // Grouped-query attention: each run of `group` consecutive entries (the query heads of
  // one K/V head) reads the same k and v rows and has its dk and dv at the same rows.
  // Backward runs a group's entries in order on one thread, each adding its share.
  std::size_t group = 1;
};

// A query row's log-sum-exp, kept as its two parts: the row's largest score and the log of
// the sum of exp(score - max). Added up, the log rounds away beside a large max (a row a
// finite mask hides throughout, at -1e9 or the dtype's lowest: every recomputed
// probability was 1); probabilities are exp((score - max) - log_sum).
template <class T>
struct RowLogSumExp {
  T max;
  T log_sum;
};

// out (at out_rows) and lse [batches, lq]. A row with every key masked gets zeros and
// max = +inf (so that recomputed probabilities are 0).
template <class T>
void attention_forward(const AttentionProblem<T>& p, T* out, RowLogSumExp<T>* lse);

// Gradients at dq_rows, dk_rows, dv_rows, all written (not accumulated): the rows of
// different entries (of different groups, for dk and dv) must not overlap. dout is laid
// out as out.
template <class T>
void attention_backward(const AttentionProblem<T>& p, const T* out, const RowLogSumExp<T>* lse, const T* dout, T* dq,
                        T* dk, T* dv);

// The probabilities actually applied to v (after dropout), [batches, lq, lk].
template <class T>
void attention_weights(const AttentionProblem<T>& p, const RowLogSumExp<T>* lse, T* weights);

// Given the gradient of those weights, adds its share into dq and dk (at dq_rows and
// dk_rows, which must not overlap as for attention_backward). probs are the probabilities
// before dropout ([batches, lq, lk], attention_weights with dropout_p = 0); masks and bias
// get none.
template <class T>
void attention_weights_backward(const AttentionProblem<T>& p, const T* probs, const T* dweights, T* dq, T* dk);

}  // namespace xgrad::kernels
