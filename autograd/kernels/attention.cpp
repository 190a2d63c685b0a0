#include "xgrad/autograd/kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "xgrad/autograd/kernels/gemm.hpp"
#include "xgrad/autograd/kernels/prefetch.hpp"
#include "xgrad/autograd/kernels/vexp.hpp"
#include "xgrad/autograd/parallel.hpp"

namespace xgrad::kernels {

namespace {

constexpr std::size_t kBlockQ = 128;  // query rows per block

// Keys per block. bf16 products cost oneDNN more per call than OpenBLAS's float32 ones
// (both operands packed each call): wider key blocks halve the calls, at about 1.6x the
// rate for the scores' [128, 128, d] products at d = 32 (Zen 5, one thread).
template <class T>
std::size_t key_block(const AttentionProblem<T>& p) {
  return p.bf16 ? 256 : 128;
}

// rows x cols from `from` (row stride from_ld) to `to` (row stride to_ld).
template <class T>
void copy_rows(const T* from, std::size_t from_ld, std::size_t rows, std::size_t cols, T* to, std::size_t to_ld) {
  for (std::size_t r = 0; r < rows; ++r) std::copy_n(from + r * from_ld, cols, to + r * to_ld);
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

// Scratch space for one block of scores, owned by one thread; as large as the problem's
// blocks get (short sequences need far less than kBlockQ x key_block).
template <class T>
struct ScoreBlock {
  std::size_t rows, cols;
  std::vector<T> scores;  // [rows, cols]
  explicit ScoreBlock(const AttentionProblem<T>& p)
      : rows(std::min(kBlockQ, p.lq)), cols(std::min(key_block(p), p.lk)), scores(rows * cols) {}
};

// One operand of a block product, as the product reads it: the problem's own values, or
// under bf16 autocast their rounding to bfloat16 (then the product runs on bf16); stored
// as the matrix it stands for or as its transpose.
template <class T>
struct Operand {
  const T* wide = nullptr;
  const bfloat16* narrow = nullptr;  // used instead of wide when rounded
  std::size_t ld = 1;                // row stride, as stored
  bool rounded = false;
  bool stored_transposed = false;

  // The operand from the matrix's element (row, col) on: a block of it.
  Operand at(std::size_t row, std::size_t col) const {
    const std::size_t offset = stored_transposed ? col * ld + row : row * ld + col;
    return {wide ? wide + offset : nullptr, narrow ? narrow + offset : nullptr, ld, rounded, stored_transposed};
  }
  // The transpose, reading the same storage.
  Operand transposed() const { return {wide, narrow, ld, rounded, !stored_transposed}; }
};

template <class T>
void block_gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, Operand<T> a,
                Operand<T> b, T beta, T* c, std::size_t ldc) {
  trans_a = trans_a != a.stored_transposed;
  trans_b = trans_b != b.stored_transposed;
  if constexpr (std::is_same_v<T, float>) {
    if (a.rounded) {  // then both are: the problem runs in bf16
      gemm(trans_a, trans_b, m, n, k, alpha, a.narrow, a.ld, b.narrow, b.ld, beta, c, ldc);
      return;
    }
  }
  gemm<T>(trans_a, trans_b, m, n, k, alpha, a.wide, a.ld, b.wide, b.ld, beta, c, ldc);
}

// rows x cols float32 from rows_begin (row stride ld) rounded to a dense bfloat16 [rows, cols].
inline void round_rows(const float* rows_begin, std::size_t ld, std::size_t rows, std::size_t cols, bfloat16* out) {
  for (std::size_t r = 0; r < rows; ++r) {
    if (r + kPrefetchRows < rows) prefetch_bytes(rows_begin + (r + kPrefetchRows) * ld, cols * sizeof(float));
    to_bfloat16_n(rows_begin + r * ld, cols, out + r * cols);
  }
}

// Where an entry's operand lives when it is not read in place: rounded, or transposed.
template <class T>
struct OperandCopy {
  std::vector<T> wide;
  std::unique_ptr<bfloat16[]> narrow;  // not zeroed: written in full when made
};

// An entry's rows x cols matrix at `rows_begin` (row stride ld), as its block products
// read it. In bf16 it is rounded here, once per entry, rather than once per block
// product: every block then reads the same rounded values.
template <class T>
Operand<T> entry_operand(const AttentionProblem<T>& p, const T* rows_begin, std::size_t ld, std::size_t rows,
                         std::size_t cols, OperandCopy<T>& copy) {
  if constexpr (std::is_same_v<T, float>) {
    if (p.bf16) {
      copy.narrow.reset(new bfloat16[rows * cols]);
      round_rows(rows_begin, ld, rows, cols, copy.narrow.get());
      return {nullptr, copy.narrow.get(), std::max<std::size_t>(1, cols), true};
    }
  }
  return {rows_begin, nullptr, ld};
}

// The transpose of an entry operand x (rows x cols), as products against K^T and V^T
// read it. In bf16, x's own storage read transposed (oneDNN packs either layout alike);
// otherwise copied into a dense [cols, rows], so that they run as plain A B, which
// OpenBLAS's small-matrix kernels do about 20% faster than A B^T at attention's shapes.
// Copied in 8 x 8 tiles, so that both the strided reads and the writes stay in cache lines.
template <class T>
Operand<T> entry_transpose(const Operand<T>& x, std::size_t rows, std::size_t cols, OperandCopy<T>& copy) {
  if (x.rounded) return x.transposed();
  copy.wide.resize(rows * cols);
  constexpr std::size_t kTile = 8;
  for (std::size_t r0 = 0; r0 < rows; r0 += kTile)
    for (std::size_t c0 = 0; c0 < cols; c0 += kTile) {
      const std::size_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
      for (std::size_t r = r0; r < r1; ++r)
        for (std::size_t c = c0; c < c1; ++c) copy.wide[c * rows + r] = x.wide[r * x.ld + c];
    }
  return {copy.wide.data(), nullptr, std::max<std::size_t>(1, rows)};
}

// Room for a block made on the fly (probabilities, dS) rounded to bf16: allocated (not
// zeroed) only where the problem runs in bf16.
template <class T>
std::unique_ptr<bfloat16[]> rounded_block_space(const AttentionProblem<T>& p, std::size_t elements) {
  return p.bf16 ? std::unique_ptr<bfloat16[]>(new bfloat16[elements]) : nullptr;
}

// A dense rows x cols block made on the fly as an operand: in place, or in bf16 rounded
// into `space` (from rounded_block_space, at least rows x cols).
template <class T>
Operand<T> block_operand(const AttentionProblem<T>& p, const T* block, std::size_t rows, std::size_t cols,
                         bfloat16* space) {
  if constexpr (std::is_same_v<T, float>) {
    if (p.bf16) {
      to_bfloat16_n(block, rows * cols, space);
      return {nullptr, space, std::max<std::size_t>(1, cols), true};
    }
  }
  return {block, nullptr, std::max<std::size_t>(1, cols)};
}

// An entry's K and K^T, as every block of scores reads them (in backward, made once for
// all the query heads of a K/V head).
template <class T>
struct KeyOperands {
  OperandCopy<T> k_copy, kt_copy;
  Operand<T> k, kt;

  KeyOperands(const AttentionProblem<T>& p, std::size_t b)
      : k(entry_operand(p, p.k + p.k_rows.at(b, 0), p.k_rows.stride, p.lk, p.dk, k_copy)),
        kt(entry_transpose(k, p.lk, p.dk, kt_copy)) {}
  KeyOperands(const KeyOperands&) = delete;  // the operands may point into the copies
  KeyOperands& operator=(const KeyOperands&) = delete;
};

// An entry's Q, as every block of scores reads it.
template <class T>
Operand<T> query_operand(const AttentionProblem<T>& p, std::size_t b, OperandCopy<T>& copy) {
  return entry_operand(p, p.q + p.q_rows.at(b, 0), p.q_rows.stride, p.lq, p.dk, copy);
}

// Masks block (i0, j0) of entry b's scores s [bq, bk] (scale q k^T): -inf where the keep
// mask or causality hides a key, the bias added to the rest (an additive -inf hides too).
template <class T>
void mask_scores(const AttentionProblem<T>& p, std::size_t b, std::size_t i0, std::size_t bq, std::size_t j0,
                 std::size_t bk, T* s) {
  const T minus_inf = -std::numeric_limits<T>::infinity();
  if (!p.keep.data && !p.bias.data) {  // at most causal: hide each row's future keys in one fill
    if (p.causal)
      for (std::size_t r = 0; r < bq; ++r) {
        const std::size_t first_hidden = std::clamp(i0 + r + 1, j0, j0 + bk) - j0;  // key j0 + c > query i0 + r
        std::fill(s + r * bk + first_hidden, s + (r + 1) * bk, minus_inf);
      }
    return;
  }
  for (std::size_t r = 0; r < bq; ++r) {
    const std::size_t i = i0 + r;
    for (std::size_t c = 0; c < bk; ++c) {
      const std::size_t j = j0 + c;
      if ((p.causal && j > i) || (p.keep.data && !p.keep.at(b, i, j)))
        s[r * bk + c] = minus_inf;
      else if (p.bias.data)
        s[r * bk + c] += p.bias.at(b, i, j);
    }
  }
}

// scores[r][c] = scale * q[i0 + r] . k[j0 + c] + bias, or -inf where masked. The product
// is one small GEMM, run on the calling thread (a product inside a parallel_for body is
// never split again).
template <class T>
void compute_scores(const AttentionProblem<T>& p, std::size_t b, std::size_t i0, std::size_t bq, std::size_t j0,
                    std::size_t bk, const Operand<T>& q, const KeyOperands<T>& keys, ScoreBlock<T>& block) {
  block_gemm(false, false, bq, bk, p.dk, p.scale, q.at(i0, 0), keys.kt.at(0, j0), T(0), block.scores.data(), bk);
  mask_scores(p, b, i0, bq, j0, bk, block.scores.data());
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
                const T* acc, T* out, T* lse) {
  for (std::size_t r = 0; r < bq; ++r) {
    T* o = out + p.out_rows.at(b, i0 + r);
    if (rows.row_max[r] != -std::numeric_limits<T>::infinity()) {  // some key was seen (a NaN makes the row NaN)
      const T inv = T(1) / rows.row_sum[r];
      for (std::size_t d = 0; d < p.dv; ++d) o[d] = acc[r * p.dv + d] * inv;
      lse[b * p.lq + i0 + r] = rows.row_max[r] + std::log(rows.row_sum[r]);
    } else {  // fully masked row: no probability mass anywhere
      std::fill(o, o + p.dv, T(0));
      lse[b * p.lq + i0 + r] = std::numeric_limits<T>::infinity();
    }
  }
}

template <class T>
void forward_one(const AttentionProblem<T>& p, std::size_t b, T* out, T* lse) {
  ScoreBlock<T> block(p);
  OperandCopy<T> q_copy;
  const Operand<T> q = query_operand(p, b, q_copy);
  const KeyOperands<T> keys(p, b);
  OperandCopy<T> v_copy;
  const Operand<T> v = entry_operand(p, p.v + p.v_rows.at(b, 0), p.v_rows.stride, p.lk, p.dv, v_copy);
  const auto rounded_block = rounded_block_space(p, block.scores.size());
  SoftmaxRows<T> rows(block.rows);
  std::vector<T> acc(block.rows * p.dv);
  for (std::size_t i0 = 0; i0 < p.lq; i0 += kBlockQ) {
    const std::size_t bq = std::min(kBlockQ, p.lq - i0);
    rows.reset();
    std::fill(acc.begin(), acc.end(), T(0));
    for (std::size_t j0 = 0; j0 < key_end(p, i0, bq); j0 += key_block(p)) {
      const std::size_t bk = std::min(key_block(p), key_end(p, i0, bq) - j0);
      compute_scores(p, b, i0, bq, j0, bk, q, keys, block);
      softmax_block(p, b, i0, bq, j0, bk, block.scores.data(), rows, acc.data());
      // acc += P V for the block
      block_gemm(false, false, bq, p.dv, bk, T(1), block_operand(p, block.scores.data(), bq, bk, rounded_block.get()),
                 v.at(j0, 0), T(1), acc.data(), p.dv);
    }
    write_rows(p, b, i0, bq, rows, acc.data(), out, lse);
  }
}

// What backward reads of a K/V head: K, K^T and V^T, made once for its query heads.
template <class T>
struct KeyValueOperands {
  KeyOperands<T> keys;
  OperandCopy<T> v_copy, vt_copy;
  Operand<T> values_t;

  KeyValueOperands(const AttentionProblem<T>& p, std::size_t b)
      : keys(p, b),
        values_t(entry_transpose(entry_operand(p, p.v + p.v_rows.at(b, 0), p.v_rows.stride, p.lk, p.dv, v_copy), p.lk,
                                 p.dv, vt_copy)) {}
};

// Where block products sum a gradient's rows: a window of them at a time, in place, or in
// a dense block written to the rows when the window closes. On AMX tiles a product whose C
// is strided (a head's columns of dQ, dK, dV) runs on a dense copy of C, made and written
// back every call: where several products add to each row, xlong's bf16 step ran 11%
// faster summing densely (the same sums in the same order as in place: the same bits).
//
// A transposed window holds the rows' transpose, [width, dense_rows], for products that
// write C^T (bf16): dV^T += dO^T P and dK^T += Q^T dS, whose transposed A is a head's 128
// rows of dO or Q, where dV += P^T dO and dK += dS^T Q transpose a 128 x 256 block of P or
// dS, which oneDNN's AMX kernel copies row-major on every call (at d = 32, one Xeon core:
// 8.1 us a product, 6.5 us as C^T). long's and xlong's bf16 steps 3% faster; other bits
// than the products written untransposed, the same on every thread count.
template <class T>
class GradientRows {
 public:
  // The gradient's rows from `rows` on (row stride ld, `width` wide); a window of up to
  // dense_rows rows summed densely (transposed or not), or in place when dense_rows is 0.
  GradientRows(T* rows, std::size_t ld, std::size_t width, std::size_t dense_rows, bool transposed = false)
      : rows_(rows),
        ld_(ld),
        width_(width),
        dense_rows_(dense_rows),
        transposed_(transposed && dense_rows > 0),
        dense_(dense_rows * width) {}

  bool transposed() const { return transposed_; }
  // Products write rows [first, first + count) next; `load` when they add to what is there.
  void open(std::size_t first, std::size_t count, bool load) {
    first_ = first, count_ = count;
    if (dense_.empty() || !load) return;
    if (transposed_)
      transpose_rows(rows_ + first * ld_, ld_, count, dense_.data(), dense_rows_);
    else
      copy_rows(rows_ + first * ld_, ld_, count, width_, dense_.data(), width_);
  }
  // Where products write row r on (not transposed), or the column of row r (transposed);
  // ld() is the row stride of what they write.
  T* row(std::size_t r) {
    if (dense_.empty()) return rows_ + (first_ + r) * ld_;
    return transposed_ ? dense_.data() + r : dense_.data() + r * width_;
  }
  std::size_t ld() const { return dense_.empty() ? ld_ : transposed_ ? dense_rows_ : width_; }
  void zero(std::size_t r, std::size_t count) {
    if (!transposed_)
      for (std::size_t i = r; i < r + count; ++i) std::fill_n(row(i), width_, T(0));
    else
      for (std::size_t c = 0; c < width_; ++c) std::fill_n(dense_.data() + c * dense_rows_ + r, count, T(0));
  }
  void close() {
    if (dense_.empty()) return;
    if (transposed_)
      for (std::size_t r = 0; r < count_; ++r)
        for (std::size_t c = 0; c < width_; ++c) rows_[(first_ + r) * ld_ + c] = dense_[c * dense_rows_ + r];
    else
      copy_rows(dense_.data(), width_, count_, width_, rows_ + first_ * ld_, ld_);
  }

 private:
  // count rows from `from` (row stride from_ld) into the window's transpose.
  void transpose_rows(const T* from, std::size_t from_ld, std::size_t count, T* to, std::size_t to_ld) const {
    for (std::size_t r = 0; r < count; ++r)
      for (std::size_t c = 0; c < width_; ++c) to[c * to_ld + r] = from[r * from_ld + c];
  }

  T* rows_;
  std::size_t ld_, width_, dense_rows_, first_ = 0, count_ = 0;
  bool transposed_;
  std::vector<T> dense_;
};

// Block (i0, j0) of entry b's probabilities from its scores s [bq, bk], in place: P = exp(S
// - lse), 0 where masked or the row is; where dropout is on, `dropped` [bq, bk] gets those
// it keeps, scaled (P o Z).
template <class T>
void recompute_probabilities(const AttentionProblem<T>& p, std::size_t b, std::size_t i0, std::size_t bq,
                             std::size_t j0, std::size_t bk, T* s, const T* lse, T* dropped) {
  for (std::size_t r = 0; r < bq; ++r) exp_shifted_inplace(s + r * bk, bk, lse[b * p.lq + i0 + r]);
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

// Entry b's gradients: dq written; dk and dv written too, or added to when `add_to_kv`
// (a later query head of the same K/V head).
template <class T>
void backward_one(const AttentionProblem<T>& p, std::size_t b, const KeyValueOperands<T>& kv, bool add_to_kv,
                  const T* out, const T* lse, const T* dout, T* dq, T* dk, T* dv) {
  ScoreBlock<T> block(p);
  std::vector<T> dropped(p.dropout_p > 0 ? block.scores.size() : 0), dp(block.scores.size());
  const std::size_t g_ld = p.out_rows.stride;
  const T* g = dout + p.out_rows.at(b, 0);
  // dQ summed over key blocks, dK and dV over query blocks: densely where there are several,
  // dK and dV transposed in bf16.
  const std::size_t kv_window = p.lq > kBlockQ ? key_block(p) : 0;
  GradientRows<T> dq_rows(dq + p.dq_rows.at(b, 0), p.dq_rows.stride, p.dk, p.lk > key_block(p) ? p.lq : 0),
      dk_rows(dk + p.dk_rows.at(b, 0), p.dk_rows.stride, p.dk, kv_window, p.bf16),
      dv_rows(dv + p.dv_rows.at(b, 0), p.dv_rows.stride, p.dv, kv_window, p.bf16);
  OperandCopy<T> q_copy, g_copy;
  const Operand<T> q = query_operand(p, b, q_copy), k = kv.keys.k, values_t = kv.values_t;
  const Operand<T> dout_rows = entry_operand(p, g, g_ld, p.lq, p.dv, g_copy);
  const auto rounded_block = rounded_block_space(p, block.scores.size());  // P, then dS, in bf16
  // Each gradient block is written (beta = 0) by its first product and added to after;
  // rows no product reaches (no keys at all, or keys no query sees) are zeroed. dK and
  // dV of a later query head of the group are only added to.
  dq_rows.open(0, p.lq, false);
  if (p.lk == 0) dq_rows.zero(0, p.lq);
  std::vector<T> delta(p.lq);
  row_deltas(p, b, out, dout, delta.data());

  for (std::size_t j0 = 0; j0 < p.lk; j0 += key_block(p)) {
    const std::size_t key_block_size = std::min(key_block(p), p.lk - j0);
    T key_beta = add_to_kv ? T(1) : T(0);  // for this key block's dK and dV: 0 until its first product
    dk_rows.open(j0, key_block_size, add_to_kv);
    dv_rows.open(j0, key_block_size, add_to_kv);
    for (std::size_t i0 = 0; i0 < p.lq; i0 += kBlockQ) {
      const std::size_t bq = std::min(kBlockQ, p.lq - i0);
      if (p.causal && j0 >= i0 + bq) continue;     // the whole block is in the future
      const T query_beta = j0 == 0 ? T(0) : T(1);  // for dQ: key block 0 is never in the future
      // The keys of the block some query of this block sees (all but causal's future).
      const std::size_t bk = std::min(key_block_size, key_end(p, i0, bq) - j0);
      if (key_beta == T(0) && bk < key_block_size) {  // rows this first product leaves: later ones add to them
        dk_rows.zero(bk, key_block_size - bk);
        dv_rows.zero(bk, key_block_size - bk);
      }
      compute_scores(p, b, i0, bq, j0, bk, q, kv.keys, block);
      T* prob = block.scores.data();
      recompute_probabilities(p, b, i0, bq, j0, bk, prob, lse, dropped.data());
      const bool with_dropout = p.dropout_p > 0;
      const Operand<T> dout_block = dout_rows.at(i0, 0);
      // dV += (P o Z)^T dO (or dV^T += dO^T (P o Z));   dP = dO V^T
      const Operand<T> kept = block_operand(p, with_dropout ? dropped.data() : prob, bq, bk, rounded_block.get());
      if (dv_rows.transposed())
        block_gemm(true, false, p.dv, bk, bq, T(1), dout_block, kept, key_beta, dv_rows.row(0), dv_rows.ld());
      else
        block_gemm(true, false, bk, p.dv, bq, T(1), kept, dout_block, key_beta, dv_rows.row(0), dv_rows.ld());
      block_gemm(false, false, bq, bk, p.dv, T(1), dout_block, values_t.at(0, j0), T(0), dp.data(), bk);
      score_gradient(p, b, i0, bq, j0, bk, prob, delta.data() + i0, dp.data());
      // dQ += dS K;   dK += dS^T Q
      const Operand<T> ds = block_operand(p, dp.data(), bq, bk, rounded_block.get());
      block_gemm(false, false, bq, p.dk, bk, T(1), ds, k.at(j0, 0), query_beta, dq_rows.row(i0), dq_rows.ld());
      if (dk_rows.transposed())  // dK^T += Q^T dS
        block_gemm(true, false, p.dk, bk, bq, T(1), q.at(i0, 0), ds, key_beta, dk_rows.row(0), dk_rows.ld());
      else
        block_gemm(true, false, bk, p.dk, bq, T(1), ds, q.at(i0, 0), key_beta, dk_rows.row(0), dk_rows.ld());
      key_beta = 1;
    }
    if (key_beta == T(0)) {
      dk_rows.zero(0, key_block_size);
      dv_rows.zero(0, key_block_size);
    }
    dk_rows.close();
    dv_rows.close();
  }
  dq_rows.close();
}

// The backward of K/V head `group` (entries group * p.group, ...): its query heads in
// order on this thread, so that dK and dV sum them in one order on any thread count.
template <class T>
void backward_group(const AttentionProblem<T>& p, std::size_t group, const T* out, const T* lse, const T* dout, T* dq,
                    T* dk, T* dv) {
  const std::size_t first = group * p.group;
  const KeyValueOperands<T> kv(p, first);
  for (std::size_t b = first; b < first + p.group; ++b) backward_one(p, b, kv, b != first, out, lse, dout, dq, dk, dv);
}

// Short sequences in bf16, where an entry's scores are one block (lq <= kBlockQ, lk <=
// key_block), run in bundles of entries: each block product is one oneDNN call over the
// bundle (batched_gemm) instead of one call an entry, whose cost exceeded its arithmetic
// (64 x 64 x 32 products took 1.22-1.35 us a call in the lm recipe's step, against 0.81
// us each in a batch of 24: Zen 5, one thread). The arithmetic is the entry path's, on the
// same rounded operands; only the products' calls are other, so the bits may differ from
// it (as between any two product kernels), never between thread counts: bundles are cut
// from the shape alone. Each bundle holds whole K/V groups (dK and dV sum a group's query
// heads in order, as the entry path does).
template <class T>
bool runs_in_bundles(const AttentionProblem<T>& p) {
  return std::is_same_v<T, float> && p.bf16 && p.lq > 0 && p.lk > 0 && p.lq <= kBlockQ && p.lk <= key_block(p);
}

// A bundle's scores are at most 64 KiB of float32 (backward keeps them, dP and both rounded
// to bf16 in an L2), and there are at least kMinBundles bundles where the batch allows, to
// share between threads. (Zen 5, medians of alternating runs: tiny's bf16 step 3.48 -> 2.87
// ms, lm's 1-3% faster, medium's unchanged within the noise.)
constexpr std::size_t kBundleScores = std::size_t{1} << 14;
constexpr std::size_t kMinBundles = 8;

// Entries a bundle, a multiple of the group; from the shape alone.
template <class T>
std::size_t bundle_size(const AttentionProblem<T>& p) {
  const std::size_t by_memory = kBundleScores / (p.lq * p.lk);
  const std::size_t by_count = (p.batches + kMinBundles - 1) / kMinBundles;
  return std::max<std::size_t>(1, std::min(by_memory, by_count) / p.group) * p.group;
}

// A bundle's operands: Q, K and V of `count` entries rounded to dense bf16 [count, rows, d],
// K and V to the keys some query sees (all but causal's future).
struct BundleOperands {
  std::size_t count, lq, lk;
  std::unique_ptr<bfloat16[]> q, k, v;

  BundleOperands(const AttentionProblem<float>& p, std::size_t first, std::size_t count)
      : count(count),
        lq(p.lq),
        lk(key_end(p, 0, p.lq)),
        q(new bfloat16[count * lq * p.dk]),
        k(new bfloat16[count * lk * p.dk]),
        v(new bfloat16[count * lk * p.dv]) {
    for (std::size_t e = 0; e < count; ++e) {
      const std::size_t b = first + e;
      round_rows(p.q + p.q_rows.at(b, 0), p.q_rows.stride, lq, p.dk, q.get() + e * lq * p.dk);
      round_rows(p.k + p.k_rows.at(b, 0), p.k_rows.stride, lk, p.dk, k.get() + e * lk * p.dk);
      round_rows(p.v + p.v_rows.at(b, 0), p.v_rows.stride, lk, p.dv, v.get() + e * lk * p.dv);
    }
  }
};

// Every entry's scores [count, lq, lk], masked: S = scale Q K^T.
std::vector<float> bundle_scores(const AttentionProblem<float>& p, std::size_t first, const BundleOperands& x) {
  std::vector<float> scores(x.count * x.lq * x.lk);
  batched_gemm(x.count, false, true, x.lq, x.lk, p.dk, p.scale, x.q.get(), p.dk, x.lq * p.dk, x.k.get(), p.dk,
               x.lk * p.dk, 0.0f, scores.data(), x.lk, x.lq * x.lk);
  for (std::size_t e = 0; e < x.count; ++e)
    mask_scores(p, first + e, 0, x.lq, 0, x.lk, scores.data() + e * x.lq * x.lk);
  return scores;
}

std::unique_ptr<bfloat16[]> rounded(const std::vector<float>& x) {
  std::unique_ptr<bfloat16[]> out(new bfloat16[x.size()]);
  to_bfloat16_n(x.data(), x.size(), out.get());
  return out;
}

template <class T>
void forward_bundle(const AttentionProblem<T>& p, std::size_t first, std::size_t count, T* out, T* lse) {
  if constexpr (std::is_same_v<T, float>) {
    const BundleOperands x(p, first, count);
    std::vector<float> probs = bundle_scores(p, first, x), acc(count * x.lq * p.dv, 0.0f);
    std::vector<SoftmaxRows<float>> rows(count, SoftmaxRows<float>(x.lq));
    for (std::size_t e = 0; e < count; ++e) {
      rows[e].reset();
      softmax_block(p, first + e, 0, x.lq, 0, x.lk, probs.data() + e * x.lq * x.lk, rows[e],
                    acc.data() + e * x.lq * p.dv);
    }
    batched_gemm(count, false, false, x.lq, p.dv, x.lk, 1.0f, rounded(probs).get(), x.lk, x.lq * x.lk, x.v.get(), p.dv,
                 x.lk * p.dv, 1.0f, acc.data(), p.dv, x.lq * p.dv);
    for (std::size_t e = 0; e < count; ++e)
      write_rows(p, first + e, 0, x.lq, rows[e], acc.data() + e * x.lq * p.dv, out, lse);
  }
}

// A bundle's dense gradient [count, rows, width] out to each entry's `total_rows` rows of
// `to` (at `at`; those past `rows` get zeros): written by a group's first entry, added to by
// the rest, in order.
void write_gradient(const std::vector<float>& dense, std::size_t first, std::size_t count, std::size_t rows,
                    std::size_t total_rows, std::size_t width, std::size_t group, const BatchRows& at, float* to) {
  for (std::size_t e = 0; e < count; ++e) {
    const std::size_t b = first + e;
    const bool adds = b % group != 0;
    for (std::size_t r = 0; r < total_rows; ++r) {
      float* row = to + at.at(b, r);
      if (r >= rows) {
        if (!adds) std::fill_n(row, width, 0.0f);
        continue;
      }
      const float* from = dense.data() + (e * rows + r) * width;
      if (adds)
        for (std::size_t c = 0; c < width; ++c) row[c] += from[c];
      else
        std::copy_n(from, width, row);
    }
  }
}

template <class T>
void backward_bundle(const AttentionProblem<T>& p, std::size_t first, std::size_t count, const T* out, const T* lse,
                     const T* dout, T* dq, T* dk, T* dv) {
  if constexpr (std::is_same_v<T, float>) {
    const BundleOperands x(p, first, count);
    const std::size_t lq = x.lq, lk = x.lk, block = lq * lk;
    const bool with_dropout = p.dropout_p > 0;
    std::unique_ptr<bfloat16[]> g(new bfloat16[count * lq * p.dv]);  // dO
    std::vector<float> delta(count * lq);
    for (std::size_t e = 0; e < count; ++e) {
      round_rows(dout + p.out_rows.at(first + e, 0), p.out_rows.stride, lq, p.dv, g.get() + e * lq * p.dv);
      row_deltas(p, first + e, out, dout, delta.data() + e * lq);
    }
    std::vector<float> probs = bundle_scores(p, first, x), dropped(with_dropout ? probs.size() : 0);
    for (std::size_t e = 0; e < count; ++e)
      recompute_probabilities(p, first + e, 0, lq, 0, lk, probs.data() + e * block, lse,
                              with_dropout ? dropped.data() + e * block : nullptr);
    // dV = (P o Z)^T dO;   dP = dO V^T
    std::vector<float> dv_dense(count * lk * p.dv), dp(count * block);
    batched_gemm(count, true, false, lk, p.dv, lq, 1.0f, rounded(with_dropout ? dropped : probs).get(), lk, block,
                 g.get(), p.dv, lq * p.dv, 0.0f, dv_dense.data(), p.dv, lk * p.dv);
    batched_gemm(count, false, true, lq, lk, p.dv, 1.0f, g.get(), p.dv, lq * p.dv, x.v.get(), p.dv, lk * p.dv, 0.0f,
                 dp.data(), lk, block);
    for (std::size_t e = 0; e < count; ++e)
      score_gradient(p, first + e, 0, lq, 0, lk, probs.data() + e * block, delta.data() + e * lq,
                     dp.data() + e * block);
    // dQ = dS K;   dK = dS^T Q
    const auto ds = rounded(dp);
    std::vector<float> dq_dense(count * lq * p.dk), dk_dense(count * lk * p.dk);
    batched_gemm(count, false, false, lq, p.dk, lk, 1.0f, ds.get(), lk, block, x.k.get(), p.dk, lk * p.dk, 0.0f,
                 dq_dense.data(), p.dk, lq * p.dk);
    batched_gemm(count, true, false, lk, p.dk, lq, 1.0f, ds.get(), lk, block, x.q.get(), p.dk, lq * p.dk, 0.0f,
                 dk_dense.data(), p.dk, lk * p.dk);
    write_gradient(dq_dense, first, count, lq, lq, p.dk, 1, p.dq_rows, dq);
    write_gradient(dk_dense, first, count, lk, p.lk, p.dk, p.group, p.dk_rows, dk);
    write_gradient(dv_dense, first, count, lk, p.lk, p.dv, p.group, p.dv_rows, dv);
  }
}

// body(first, count) for each bundle of entries, in parallel.
template <class T, class Body>
void for_each_bundle(const AttentionProblem<T>& p, double work_per_entry, Body&& body) {
  const std::size_t size = bundle_size(p), bundles = (p.batches + size - 1) / size;
  parallel_for(bundles, work_per_entry * static_cast<double>(size),
               [&](std::size_t i) { body(i * size, std::min(size, p.batches - i * size)); });
}

template <class T>
void weights_one(const AttentionProblem<T>& p, std::size_t b, const T* lse, T* weights) {
  ScoreBlock<T> block(p);
  OperandCopy<T> q_copy;
  const Operand<T> q = query_operand(p, b, q_copy);
  const KeyOperands<T> keys(p, b);
  T* w = weights + b * p.lq * p.lk;
  std::fill(w, w + p.lq * p.lk, T(0));
  for (std::size_t i0 = 0; i0 < p.lq; i0 += kBlockQ) {
    const std::size_t bq = std::min(kBlockQ, p.lq - i0);
    for (std::size_t j0 = 0; j0 < key_end(p, i0, bq); j0 += key_block(p)) {
      const std::size_t bk = std::min(key_block(p), key_end(p, i0, bq) - j0);
      compute_scores(p, b, i0, bq, j0, bk, q, keys, block);
      for (std::size_t r = 0; r < bq; ++r) {
        const T row_lse = lse[b * p.lq + i0 + r];
        if (std::isinf(row_lse)) continue;
        for (std::size_t c = 0; c < bk; ++c)
          w[(i0 + r) * p.lk + j0 + c] =
              std::exp(block.scores[r * bk + c] - row_lse) * dropout_factor(p, b, i0 + r, j0 + c);
      }
    }
  }
}

// Entry b's share of attention_weights_backward, given its K as the products read it.
template <class T>
void weights_backward_one(const AttentionProblem<T>& p, std::size_t b, const Operand<T>& k, const T* probs,
                          const T* dweights, T* dq, T* dk) {
  const std::size_t lq = p.lq, lk = p.lk;
  const T* prob = probs + b * lq * lk;
  const T* dw = dweights + b * lq * lk;
  // dS = P (dP - rowsum(P dP)) * scale, with dP = dW times the dropout factor.
  std::vector<T> ds(lq * lk);
  for (std::size_t i = 0; i < lq; ++i) {
    T* row = ds.data() + i * lk;
    T d = 0;
    for (std::size_t j = 0; j < lk; ++j) {
      row[j] = dw[i * lk + j] * dropout_factor(p, b, i, j);
      d += prob[i * lk + j] * row[j];
    }
    for (std::size_t j = 0; j < lk; ++j) row[j] = prob[i * lk + j] * (row[j] - d) * p.scale;
  }
  // dq += dS K, dk += dS^T Q, at the entry's rows.
  OperandCopy<T> q_copy;
  const auto rounded_ds = rounded_block_space(p, ds.size());
  const Operand<T> ds_operand = block_operand(p, ds.data(), lq, lk, rounded_ds.get());
  block_gemm(false, false, lq, p.dk, lk, T(1), ds_operand, k, T(1), dq + p.dq_rows.at(b, 0), p.dq_rows.stride);
  block_gemm(true, false, lk, p.dk, lq, T(1), ds_operand, query_operand(p, b, q_copy), T(1), dk + p.dk_rows.at(b, 0),
             p.dk_rows.stride);
}

// attention_weights_backward for K/V head `group`: its query heads in order, K made once.
template <class T>
void weights_backward_group(const AttentionProblem<T>& p, std::size_t group, const T* probs, const T* dweights, T* dq,
                            T* dk) {
  const std::size_t first = group * p.group;
  OperandCopy<T> k_copy;
  const Operand<T> k = entry_operand(p, p.k + p.k_rows.at(first, 0), p.k_rows.stride, p.lk, p.dk, k_copy);
  for (std::size_t b = first; b < first + p.group; ++b) weights_backward_one(p, b, k, probs, dweights, dq, dk);
}

}  // namespace

BatchRows BatchRows::dense(std::size_t batches, std::size_t rows, std::size_t width, std::size_t group) {
  BatchRows r;
  r.stride = width;
  for (std::size_t b = 0; b < batches; ++b) r.offset.push_back(b / group * rows * width);
  return r;
}

// Operations per batch entry, to decide whether threads are worth starting.
template <class T>
double work_of(const AttentionProblem<T>& p) {
  return static_cast<double>(p.lq) * static_cast<double>(p.lk) * static_cast<double>(p.dk + p.dv);
}

template <class T>
void attention_forward(const AttentionProblem<T>& p, T* out, T* lse) {
  if (runs_in_bundles(p))
    return for_each_bundle(p, work_of(p),
                           [&](std::size_t first, std::size_t count) { forward_bundle(p, first, count, out, lse); });
  parallel_for(p.batches, work_of(p), [&](std::size_t b) { forward_one(p, b, out, lse); });
}

// Parallel over K/V heads, never over the query heads sharing one: their dK and dV are
// summed on one thread, in order.
template <class T>
void attention_backward(const AttentionProblem<T>& p, const T* out, const T* lse, const T* dout, T* dq, T* dk, T* dv) {
  if (runs_in_bundles(p))
    return for_each_bundle(p, 2 * work_of(p), [&](std::size_t first, std::size_t count) {
      backward_bundle(p, first, count, out, lse, dout, dq, dk, dv);
    });
  parallel_for(p.batches / p.group, 2 * work_of(p) * static_cast<double>(p.group),
               [&](std::size_t g) { backward_group(p, g, out, lse, dout, dq, dk, dv); });
}

template <class T>
void attention_weights(const AttentionProblem<T>& p, const T* lse, T* weights) {
  parallel_for(p.batches, work_of(p), [&](std::size_t b) { weights_one(p, b, lse, weights); });
}

template <class T>
void attention_weights_backward(const AttentionProblem<T>& p, const T* probs, const T* dweights, T* dq, T* dk) {
  parallel_for(p.batches / p.group, work_of(p) * static_cast<double>(p.group),
               [&](std::size_t g) { weights_backward_group(p, g, probs, dweights, dq, dk); });
}

#define XGRAD_INSTANTIATE(T)                                                                                 \
  template void attention_forward<T>(const AttentionProblem<T>&, T*, T*);                                    \
  template void attention_backward<T>(const AttentionProblem<T>&, const T*, const T*, const T*, T*, T*, T*); \
  template void attention_weights<T>(const AttentionProblem<T>&, const T*, T*);                              \
  template void attention_weights_backward<T>(const AttentionProblem<T>&, const T*, const T*, T*, T*);
XGRAD_INSTANTIATE(float)
XGRAD_INSTANTIATE(double)
#undef XGRAD_INSTANTIATE

}  // namespace xgrad::kernels
