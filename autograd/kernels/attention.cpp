#include "xgrad/autograd/kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "xgrad/autograd/kernels/attention_steps.hpp"
#include "xgrad/autograd/kernels/gemm.hpp"
#include "xgrad/autograd/parallel.hpp"

namespace xgrad::kernels {

namespace {

using namespace attention_steps;

// rows x cols from `from` (row stride from_ld) to `to` (row stride to_ld).
template <class T>
void copy_rows(const T* from, std::size_t from_ld, std::size_t rows, std::size_t cols, T* to, std::size_t to_ld) {
  for (std::size_t r = 0; r < rows; ++r) std::copy_n(from + r * from_ld, cols, to + r * to_ld);
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

// scores[r][c] = scale * q[i0 + r] . k[j0 + c] + bias, or -inf where masked. The product
// is one small GEMM, run on the calling thread (a product inside a parallel_for body is
// never split again).
template <class T>
void compute_scores(const AttentionProblem<T>& p, std::size_t b, std::size_t i0, std::size_t bq, std::size_t j0,
                    std::size_t bk, const Operand<T>& q, const KeyOperands<T>& keys, ScoreBlock<T>& block) {
  block_gemm(false, false, bq, bk, p.dk, p.scale, q.at(i0, 0), keys.kt.at(0, j0), T(0), block.scores.data(), bk);
  mask_scores(p, b, i0, bq, j0, bk, block.scores.data());
}

template <class T>
void forward_one(const AttentionProblem<T>& p, std::size_t b, T* out, RowLogSumExp<T>* lse) {
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
    for (std::size_t j0 = first_key_block(p, i0); j0 < key_end(p, i0, bq); j0 += key_block(p)) {
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

// Entry b's gradients: dq written; dk and dv written too, or added to when `add_to_kv`
// (a later query head of the same K/V head).
template <class T>
void backward_one(const AttentionProblem<T>& p, std::size_t b, const KeyValueOperands<T>& kv, bool add_to_kv,
                  const T* out, const RowLogSumExp<T>* lse, const T* dout, T* dq, T* dk, T* dv) {
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
  for (std::size_t i0 = 0; i0 < p.lq; i0 += kBlockQ)  // no keys, or past every key's window (lq > lk + window)
    if (first_key_block(p, i0) >= key_end(p, i0, std::min(kBlockQ, p.lq - i0)))
      dq_rows.zero(i0, std::min(kBlockQ, p.lq - i0));
  std::vector<T> delta(p.lq);
  row_deltas(p, b, out, dout, delta.data());

  for (std::size_t j0 = 0; j0 < p.lk; j0 += key_block(p)) {
    const std::size_t key_block_size = std::min(key_block(p), p.lk - j0);
    T key_beta = add_to_kv ? T(1) : T(0);  // for this key block's dK and dV: 0 until its first product
    dk_rows.open(j0, key_block_size, add_to_kv);
    dv_rows.open(j0, key_block_size, add_to_kv);
    for (std::size_t i0 = 0; i0 < p.lq; i0 += kBlockQ) {
      const std::size_t bq = std::min(kBlockQ, p.lq - i0);
      if (p.causal && j0 >= i0 + bq) continue;                          // the whole block is in the future
      if (j0 < first_key_block(p, i0)) continue;                        // or before the window of every query in it
      const T query_beta = j0 == first_key_block(p, i0) ? T(0) : T(1);  // for dQ: the first block it visits
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
void backward_group(const AttentionProblem<T>& p, std::size_t group, const T* out, const RowLogSumExp<T>* lse,
                    const T* dout, T* dq, T* dk, T* dv) {
  const std::size_t first = group * p.group;
  const KeyValueOperands<T> kv(p, first);
  for (std::size_t b = first; b < first + p.group; ++b) backward_one(p, b, kv, b != first, out, lse, dout, dq, dk, dv);
}

template <class T>
void weights_one(const AttentionProblem<T>& p, std::size_t b, const RowLogSumExp<T>* lse, T* weights) {
  ScoreBlock<T> block(p);
  OperandCopy<T> q_copy;
  const Operand<T> q = query_operand(p, b, q_copy);
  const KeyOperands<T> keys(p, b);
  T* w = weights + b * p.lq * p.lk;
  std::fill(w, w + p.lq * p.lk, T(0));
  for (std::size_t i0 = 0; i0 < p.lq; i0 += kBlockQ) {
    const std::size_t bq = std::min(kBlockQ, p.lq - i0);
    for (std::size_t j0 = first_key_block(p, i0); j0 < key_end(p, i0, bq); j0 += key_block(p)) {
      const std::size_t bk = std::min(key_block(p), key_end(p, i0, bq) - j0);
      compute_scores(p, b, i0, bq, j0, bk, q, keys, block);
      for (std::size_t r = 0; r < bq; ++r) {
        const RowLogSumExp<T>& row = lse[b * p.lq + i0 + r];
        if (std::isinf(row.max)) continue;
        for (std::size_t c = 0; c < bk; ++c)
          w[(i0 + r) * p.lk + j0 + c] =
              std::exp((block.scores[r * bk + c] - row.max) - row.log_sum) * dropout_factor(p, b, i0 + r, j0 + c);
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

template <class T>
void attention_forward(const AttentionProblem<T>& p, T* out, RowLogSumExp<T>* lse) {
  if constexpr (std::is_same_v<T, float>)
    if (runs_in_bundles(p)) return forward_in_bundles(p, out, lse);
  parallel_for(p.batches, work_of(p), [&](std::size_t b) { forward_one(p, b, out, lse); });
}

// Parallel over K/V heads, never over the query heads sharing one: their dK and dV are
// summed on one thread, in order.
template <class T>
void attention_backward(const AttentionProblem<T>& p, const T* out, const RowLogSumExp<T>* lse, const T* dout, T* dq,
                        T* dk, T* dv) {
  if constexpr (std::is_same_v<T, float>)
    if (runs_in_bundles(p)) return backward_in_bundles(p, out, lse, dout, dq, dk, dv);
  parallel_for(p.batches / p.group, 2 * work_of(p) * static_cast<double>(p.group),
               [&](std::size_t g) { backward_group(p, g, out, lse, dout, dq, dk, dv); });
}

template <class T>
void attention_weights(const AttentionProblem<T>& p, const RowLogSumExp<T>* lse, T* weights) {
  parallel_for(p.batches, work_of(p), [&](std::size_t b) { weights_one(p, b, lse, weights); });
}

template <class T>
void attention_weights_backward(const AttentionProblem<T>& p, const T* probs, const T* dweights, T* dq, T* dk) {
  parallel_for(p.batches / p.group, work_of(p) * static_cast<double>(p.group),
               [&](std::size_t g) { weights_backward_group(p, g, probs, dweights, dq, dk); });
}

#define XGRAD_INSTANTIATE(T)                                                                                          \
  template void attention_forward<T>(const AttentionProblem<T>&, T*, RowLogSumExp<T>*);                               \
  template void attention_backward<T>(const AttentionProblem<T>&, const T*, const RowLogSumExp<T>*, const T*, T*, T*, \
                                      T*);                                                                            \
  template void attention_weights<T>(const AttentionProblem<T>&, const RowLogSumExp<T>*, T*);                         \
  template void attention_weights_backward<T>(const AttentionProblem<T>&, const T*, const T*, T*, T*);
XGRAD_INSTANTIATE(float)
XGRAD_INSTANTIATE(double)
#undef XGRAD_INSTANTIATE

}  // namespace xgrad::kernels
