#pragma once
// The steps of attention's blocks that both of its paths take (attention.cpp, an entry at a
// time; attention_bundles.cpp, bf16 entries in bundles): the block sizes, dropout's factor,
// masking, the online softmax and its output rows, backward's recomputed probabilities and
// dS. The block products around them are each path's own.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "xgrad/autograd/bfloat16.hpp"
#include "xgrad/autograd/kernels/attention.hpp"
#include "xgrad/autograd/kernels/prefetch.hpp"
#include "xgrad/autograd/kernels/vexp.hpp"

namespace xgrad::kernels::attention_steps {

inline constexpr std::size_t kBlockQ = 128;  // query rows per block

// Keys per block. bf16 products cost oneDNN more per call than OpenBLAS's float32 ones
// (both operands packed each call): wider key blocks halve the calls, at about 1.6x the
// rate for the scores' [128, 128, d] products at d = 32 (Zen 5, one thread).
template <class T>
std::size_t key_block(const AttentionProblem<T>& p) {
  return p.bf16 ? 256 : 128;
}

template <class T>
inline T dot(std::size_t n, const T* x, const T* y) {
  T s = 0;
  for (std::size_t i = 0; i < n; ++i) s += x[i] * y[i];
  return s;
}

// A counter-based generator: the dropout decision for (b, i, j) is a pure function of
// the seed, so backward regenerates forward's mask without storing it.
template <class T>
inline double dropout_uniform(const AttentionProblem<T>& p, std::size_t b, std::size_t i, std::size_t j) {
  std::uint64_t x = p.dropout_seed + ((static_cast<std::uint64_t>(b) * p.lq + i) * p.lk + j) * 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;  // splitmix64's finalizer
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) * 0x1.0p-53;
}

// The factor dropout applies to probability (b, i, j): 0 or 1 / (1 - p).
template <class T>
inline T dropout_factor(const AttentionProblem<T>& p, std::size_t b, std::size_t i, std::size_t j) {
  if (p.dropout_p <= 0) return T(1);
  return dropout_uniform(p, b, i, j) < p.dropout_p ? T(0) : static_cast<T>(1.0 / (1.0 - p.dropout_p));
}

// The end of the keys a query block [i0, i0 + bq) can see: under a causal mask the block's
// last query's, so that no block of scores is computed for keys every query of it hides
// (with key blocks of 256 and query blocks of 128, long's causal blocks were 20% such
// keys).
template <class T>
std::size_t key_end(const AttentionProblem<T>& p, std::size_t i0, std::size_t bq) {
  return p.causal ? std::min(p.lk, i0 + bq) : p.lk;
}

// The first key a query block [i0, ...) can see: under a sliding window its first query's
// first, i0 - window + 1; else 0.
template <class T>
std::size_t key_begin(const AttentionProblem<T>& p, std::size_t i0) {
  return p.causal && p.window > 0 && i0 >= p.window ? std::min(p.lk, i0 - p.window + 1) : 0;
}

// The first key block a query block [i0, ...) visits: the one holding key_begin. Blocks
// before it hold only keys every query of the block hides.
template <class T>
std::size_t first_key_block(const AttentionProblem<T>& p, std::size_t i0) {
  return key_begin(p, i0) / key_block(p) * key_block(p);
}

// rows x cols float32 from rows_begin (row stride ld) rounded to a dense bfloat16 [rows, cols].
inline void round_rows(const float* rows_begin, std::size_t ld, std::size_t rows, std::size_t cols, bfloat16* out) {
  for (std::size_t r = 0; r < rows; ++r) {
    if (r + kPrefetchRows < rows) prefetch_bytes(rows_begin + (r + kPrefetchRows) * ld, cols * sizeof(float));
    to_bfloat16_n(rows_begin + r * ld, cols, out + r * cols);
  }
}

// Masks block (i0, j0) of entry b's scores s [bq, bk] (scale q k^T): -inf where the keep
// mask, causality or the sliding window hides a key, the bias added to the rest (an
// additive -inf hides too).
template <class T>
void mask_scores(const AttentionProblem<T>& p, std::size_t b, std::size_t i0, std::size_t bq, std::size_t j0,
                 std::size_t bk, T* s) {
  const T minus_inf = -std::numeric_limits<T>::infinity();
  const auto before_window = [&](std::size_t i, std::size_t j) { return p.window > 0 && j + p.window <= i; };
  if (!p.keep.data && !p.bias.data) {  // at most causal: hide each row's past and future keys in two fills
    if (p.causal)
      for (std::size_t r = 0; r < bq; ++r) {
        const std::size_t i = i0 + r;
        const std::size_t first_hidden = std::clamp(i + 1, j0, j0 + bk) - j0;  // key j0 + c > query i
        std::fill(s + r * bk + first_hidden, s + (r + 1) * bk, minus_inf);
        if (p.window > 0 && i >= p.window) {  // keys j0 + c <= i - window
          const std::size_t first_seen = std::clamp(i - p.window + 1, j0, j0 + bk) - j0;
          std::fill(s + r * bk, s + r * bk + first_seen, minus_inf);
        }
      }
    return;
  }
  for (std::size_t r = 0; r < bq; ++r) {
    const std::size_t i = i0 + r;
    for (std::size_t c = 0; c < bk; ++c) {
      const std::size_t j = j0 + c;
      if ((p.causal && (j > i || before_window(i, j))) || (p.keep.data && !p.keep.at(b, i, j)))
        s[r * bk + c] = minus_inf;
      else if (p.bias.data)
        s[r * bk + c] += p.bias.at(b, i, j);
    }
  }
}

// The online softmax of a block of query rows as forward carries it over key blocks: each
// row's running maximum and sum of exponentials.
template <class T>
struct SoftmaxRows {
  std::vector<T> row_max, row_sum, new_max, rescale;

  explicit SoftmaxRows(std::size_t rows) : row_max(rows), row_sum(rows), new_max(rows), rescale(rows) {}
  void reset() {
    std::fill(row_max.begin(), row_max.end(), -std::numeric_limits<T>::infinity());
    std::fill(row_sum.begin(), row_sum.end(), T(0));
  }
};

// Folds block (i0, j0) of entry b's scores s [bq, bk] into the rows' softmax: s becomes the
// block's probabilities under the rows' new maxima (dropout applied), and what acc [bq, dv]
// summed under the old maxima is rescaled to the new.
template <class T>
void softmax_block(const AttentionProblem<T>& p, std::size_t b, std::size_t i0, std::size_t bq, std::size_t j0,
                   std::size_t bk, T* scores, SoftmaxRows<T>& rows, T* acc) {
  const T minus_inf = -std::numeric_limits<T>::infinity();
  // Each row's new maximum, and the factor exp(old - new) that rescales what was summed
  // under the old one, every row's in one vector pass.
  for (std::size_t r = 0; r < bq; ++r) {
    rows.new_max[r] = max_or_nan(rows.row_max[r], max_of(scores + r * bk, bk));
    rows.rescale[r] = rows.new_max[r] == minus_inf ? T(0) : rows.row_max[r] - rows.new_max[r];
  }
  exp_shifted_inplace(rows.rescale.data(), bq, T(0));
  for (std::size_t r = 0; r < bq; ++r) {
    T* s = scores + r * bk;
    if (rows.new_max[r] == minus_inf) {  // every key so far is masked: nothing to add
      std::fill(s, s + bk, T(0));
      continue;
    }
    const T sum = exp_shifted_inplace(s, bk, rows.new_max[r]);
    rows.row_sum[r] = rows.row_sum[r] * rows.rescale[r] + sum;
    rows.row_max[r] = rows.new_max[r];
    if (rows.rescale[r] != T(1))
      for (std::size_t d = 0; d < p.dv; ++d) acc[r * p.dv + d] *= rows.rescale[r];
    if (p.dropout_p > 0)  // after the sum: dropout acts on the normalised weights
      for (std::size_t c = 0; c < bk; ++c) s[c] *= dropout_factor(p, b, i0 + r, j0 + c);
  }
}

// Entry b's output rows [i0, i0 + bq) and their logsumexp, from the rows' softmax and
// acc [bq, dv], the sum of their probabilities times V.
template <class T>
void write_rows(const AttentionProblem<T>& p, std::size_t b, std::size_t i0, std::size_t bq, const SoftmaxRows<T>& rows,
                const T* acc, T* out, RowLogSumExp<T>* lse) {
  for (std::size_t r = 0; r < bq; ++r) {
    T* o = out + p.out_rows.at(b, i0 + r);
    if (rows.row_max[r] != -std::numeric_limits<T>::infinity()) {  // some key was seen (a NaN makes the row NaN)
      const T inv = T(1) / rows.row_sum[r];
      for (std::size_t d = 0; d < p.dv; ++d) o[d] = acc[r * p.dv + d] * inv;
      lse[b * p.lq + i0 + r] = {rows.row_max[r], std::log(rows.row_sum[r])};
    } else {  // fully masked row: no probability mass anywhere
      std::fill(o, o + p.dv, T(0));
      lse[b * p.lq + i0 + r] = {std::numeric_limits<T>::infinity(), T(0)};
    }
  }
}

// Block (i0, j0) of entry b's probabilities from its scores s [bq, bk], in place: P =
// exp((S - max) - log_sum), 0 where masked or the row is; where dropout is on, `dropped` [bq, bk] gets those
// it keeps, scaled (P o Z).
template <class T>
void recompute_probabilities(const AttentionProblem<T>& p, std::size_t b, std::size_t i0, std::size_t bq,
                             std::size_t j0, std::size_t bk, T* s, const RowLogSumExp<T>* lse, T* dropped) {
  for (std::size_t r = 0; r < bq; ++r) {
    const RowLogSumExp<T>& row = lse[b * p.lq + i0 + r];
    exp_shifted_to(s + r * bk, s + r * bk, bk, row.max, row.log_sum);
  }
  if (p.dropout_p > 0)
    for (std::size_t r = 0; r < bq; ++r)
      for (std::size_t c = 0; c < bk; ++c) dropped[r * bk + c] = s[r * bk + c] * dropout_factor(p, b, i0 + r, j0 + c);
}

// dS = P o (dP o Z - D) * scale for block (i0, j0) of entry b, written over dp [bq, bk];
// delta holds its rows' D.
template <class T>
void score_gradient(const AttentionProblem<T>& p, std::size_t b, std::size_t i0, std::size_t bq, std::size_t j0,
                    std::size_t bk, const T* prob, const T* delta, T* dp) {
  for (std::size_t r = 0; r < bq; ++r) {
    const T d = delta[r];
    T* ds = dp + r * bk;
    const T* pr = prob + r * bk;
    if (p.dropout_p > 0)
      for (std::size_t c = 0; c < bk; ++c) ds[c] = pr[c] * (ds[c] * dropout_factor(p, b, i0 + r, j0 + c) - d) * p.scale;
    else
      for (std::size_t c = 0; c < bk; ++c) ds[c] = pr[c] * (ds[c] - d) * p.scale;
  }
}

// D_i = dout_i . out_i for each of entry b's query rows; it equals sum_j P_ij dP_ij,
// dropout included.
template <class T>
void row_deltas(const AttentionProblem<T>& p, std::size_t b, const T* out, const T* dout, T* delta) {
  for (std::size_t i = 0; i < p.lq; ++i) delta[i] = dot(p.dv, dout + p.out_rows.at(b, i), out + p.out_rows.at(b, i));
}

// Operations per batch entry, to decide whether threads are worth starting.
template <class T>
double work_of(const AttentionProblem<T>& p) {
  return static_cast<double>(p.lq) * static_cast<double>(p.lk) * static_cast<double>(p.dk + p.dv);
}

// The bundle path (attention_bundles.cpp): where it runs, and its forward and backward,
// with attention_forward's and attention_backward's contracts.
bool runs_in_bundles(const AttentionProblem<float>& p);
void forward_in_bundles(const AttentionProblem<float>& p, float* out, RowLogSumExp<float>* lse);
void backward_in_bundles(const AttentionProblem<float>& p, const float* out, const RowLogSumExp<float>* lse,
                         const float* dout, float* dq, float* dk, float* dv);

}  // namespace xgrad::kernels::attention_steps
