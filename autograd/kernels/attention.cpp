#include "autograd/kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/kernels/parallel.hpp"

namespace xgrad::kernels {

namespace {

constexpr std::size_t kBlockQ = 64;  // query rows per block
constexpr std::size_t kBlockK = 64;  // keys per block

// y += a * x over n elements (the inner loop of every block product below: written this
// way, it vectorizes without reassociating any sum).
template <class T>
inline void axpy(std::size_t n, T a, const T* __restrict x, T* __restrict y) {
  for (std::size_t i = 0; i < n; ++i) y[i] += a * x[i];
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

// The last key block a query block [i0, i0 + bq) can see.
template <class T>
std::size_t key_end(const AttentionProblem<T>& p, std::size_t i0, std::size_t bq) {
  return p.causal ? std::min(p.lk, i0 + bq) : p.lk;
}

// Scratch space for one block of scores, owned by one thread.
template <class T>
struct ScoreBlock {
  std::vector<T> key_t;   // [dk, kBlockK]: the key block transposed
  std::vector<T> scores;  // [kBlockQ, kBlockK]
  explicit ScoreBlock(std::size_t dk) : key_t(dk * kBlockK), scores(kBlockQ * kBlockK) {}
};

// scores[r][c] = scale * q[i0 + r] . k[j0 + c] + bias, or -inf where masked (by the
// keep mask, causality, or an additive -inf).
template <class T>
void compute_scores(const AttentionProblem<T>& p, std::size_t b, std::size_t i0, std::size_t bq,
                    std::size_t j0, std::size_t bk, ScoreBlock<T>& block) {
  const T* q = p.q + p.q_offset[b] + i0 * p.dk;
  const T* k = p.k + p.k_offset[b] + j0 * p.dk;
  T* key_t = block.key_t.data();
  for (std::size_t c = 0; c < bk; ++c)
    for (std::size_t d = 0; d < p.dk; ++d) key_t[d * bk + c] = k[c * p.dk + d];
  const T minus_inf = -std::numeric_limits<T>::infinity();
  for (std::size_t r = 0; r < bq; ++r) {
    T* s = block.scores.data() + r * bk;
    std::fill(s, s + bk, T(0));
    for (std::size_t d = 0; d < p.dk; ++d) axpy(bk, q[r * p.dk + d] * p.scale, key_t + d * bk, s);
    const std::size_t i = i0 + r;
    for (std::size_t c = 0; c < bk; ++c) {
      const std::size_t j = j0 + c;
      if ((p.causal && j > i) || (p.keep.data && !p.keep.at(b, i, j)))
        s[c] = minus_inf;
      else if (p.bias.data)
        s[c] += p.bias.at(b, i, j);
    }
  }
}

template <class T>
void forward_one(const AttentionProblem<T>& p, std::size_t b, T* out, T* lse) {
  ScoreBlock<T> block(p.dk);
  std::vector<T> row_max(kBlockQ), row_sum(kBlockQ), acc(kBlockQ * p.dv);
  const T minus_inf = -std::numeric_limits<T>::infinity();
  const T* v = p.v + p.v_offset[b];
  for (std::size_t i0 = 0; i0 < p.lq; i0 += kBlockQ) {
    const std::size_t bq = std::min(kBlockQ, p.lq - i0);
    std::fill(row_max.begin(), row_max.end(), minus_inf);
    std::fill(row_sum.begin(), row_sum.end(), T(0));
    std::fill(acc.begin(), acc.end(), T(0));
    for (std::size_t j0 = 0; j0 < key_end(p, i0, bq); j0 += kBlockK) {
      const std::size_t bk = std::min(kBlockK, p.lk - j0);
      compute_scores(p, b, i0, bq, j0, bk, block);
      for (std::size_t r = 0; r < bq; ++r) {
        T* s = block.scores.data() + r * bk;
        const T new_max = std::max(row_max[r], *std::max_element(s, s + bk));
        if (new_max == minus_inf) continue;  // every key so far is masked
        // Online softmax: rescale what was summed under the old maximum.
        const T rescale = std::exp(row_max[r] - new_max);
        T sum = 0;
        for (std::size_t c = 0; c < bk; ++c) sum += (s[c] = std::exp(s[c] - new_max));
        row_sum[r] = row_sum[r] * rescale + sum;
        row_max[r] = new_max;
        T* a = acc.data() + r * p.dv;
        if (rescale != T(1))
          for (std::size_t d = 0; d < p.dv; ++d) a[d] *= rescale;
        for (std::size_t c = 0; c < bk; ++c) {
          const T weight = s[c] * dropout_factor(p, b, i0 + r, j0 + c);
          if (weight != T(0)) axpy(p.dv, weight, v + (j0 + c) * p.dv, a);
        }
      }
    }
    for (std::size_t r = 0; r < bq; ++r) {
      T* o = out + (b * p.lq + i0 + r) * p.dv;
      if (row_sum[r] > T(0)) {
        const T inv = T(1) / row_sum[r];
        for (std::size_t d = 0; d < p.dv; ++d) o[d] = acc[r * p.dv + d] * inv;
        lse[b * p.lq + i0 + r] = row_max[r] + std::log(row_sum[r]);
      } else {  // fully masked row: no probability mass anywhere
        std::fill(o, o + p.dv, T(0));
        lse[b * p.lq + i0 + r] = std::numeric_limits<T>::infinity();
      }
    }
  }
}

template <class T>
void backward_one(const AttentionProblem<T>& p, std::size_t b, const T* out, const T* lse, const T* dout,
                  T* dq, T* dk, T* dv) {
  ScoreBlock<T> block(p.dk);
  std::vector<T> value_t(p.dv * kBlockK), dp(kBlockK);
  const T* q = p.q + p.q_offset[b];
  const T* k = p.k + p.k_offset[b];
  const T* v = p.v + p.v_offset[b];
  T* dq_b = dq + b * p.lq * p.dk;
  T* dk_b = dk + b * p.lk * p.dk;
  T* dv_b = dv + b * p.lk * p.dv;
  std::fill(dq_b, dq_b + p.lq * p.dk, T(0));
  std::fill(dk_b, dk_b + p.lk * p.dk, T(0));
  std::fill(dv_b, dv_b + p.lk * p.dv, T(0));
  // D_i = dout_i . out_i equals sum_j P_ij dP_ij, dropout included.
  std::vector<T> delta(p.lq);
  for (std::size_t i = 0; i < p.lq; ++i)
    delta[i] = dot(p.dv, dout + (b * p.lq + i) * p.dv, out + (b * p.lq + i) * p.dv);

  for (std::size_t j0 = 0; j0 < p.lk; j0 += kBlockK) {
    const std::size_t bk = std::min(kBlockK, p.lk - j0);
    for (std::size_t c = 0; c < bk; ++c)
      for (std::size_t d = 0; d < p.dv; ++d) value_t[d * bk + c] = v[(j0 + c) * p.dv + d];
    for (std::size_t i0 = 0; i0 < p.lq; i0 += kBlockQ) {
      const std::size_t bq = std::min(kBlockQ, p.lq - i0);
      if (p.causal && j0 >= i0 + bq) continue;  // the whole block is in the future
      compute_scores(p, b, i0, bq, j0, bk, block);
      for (std::size_t r = 0; r < bq; ++r) {
        const std::size_t i = i0 + r;
        const T row_lse = lse[b * p.lq + i];
        if (std::isinf(row_lse)) continue;  // fully masked row: nothing flows
        const T* s = block.scores.data() + r * bk;
        const T* g = dout + (b * p.lq + i) * p.dv;
        // dP = dout v^T (times the dropout factor), for this row and key block
        std::fill(dp.begin(), dp.begin() + bk, T(0));
        for (std::size_t d = 0; d < p.dv; ++d) axpy(bk, g[d], value_t.data() + d * bk, dp.data());
        for (std::size_t c = 0; c < bk; ++c) {
          const T prob = std::exp(s[c] - row_lse);
          if (prob == T(0)) continue;
          const T factor = dropout_factor(p, b, i, j0 + c);
          if (factor != T(0)) axpy(p.dv, prob * factor, g, dv_b + (j0 + c) * p.dv);
          const T ds = prob * (dp[c] * factor - delta[i]) * p.scale;
          axpy(p.dk, ds, k + (j0 + c) * p.dk, dq_b + i * p.dk);
          axpy(p.dk, ds, q + i * p.dk, dk_b + (j0 + c) * p.dk);
        }
      }
    }
  }
}

template <class T>
void weights_one(const AttentionProblem<T>& p, std::size_t b, const T* lse, T* weights) {
  ScoreBlock<T> block(p.dk);
  T* w = weights + b * p.lq * p.lk;
  std::fill(w, w + p.lq * p.lk, T(0));
  for (std::size_t i0 = 0; i0 < p.lq; i0 += kBlockQ) {
    const std::size_t bq = std::min(kBlockQ, p.lq - i0);
    for (std::size_t j0 = 0; j0 < key_end(p, i0, bq); j0 += kBlockK) {
      const std::size_t bk = std::min(kBlockK, p.lk - j0);
      compute_scores(p, b, i0, bq, j0, bk, block);
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

}  // namespace

// Operations per batch entry, to decide whether threads are worth starting.
template <class T>
double work_of(const AttentionProblem<T>& p) {
  return static_cast<double>(p.lq) * static_cast<double>(p.lk) * static_cast<double>(p.dk + p.dv);
}

template <class T>
void attention_forward(const AttentionProblem<T>& p, T* out, T* lse) {
  parallel_for(p.batches, work_of(p), [&](std::size_t b) { forward_one(p, b, out, lse); });
}

template <class T>
void attention_backward(const AttentionProblem<T>& p, const T* out, const T* lse, const T* dout, T* dq,
                        T* dk, T* dv) {
  parallel_for(p.batches, 2 * work_of(p), [&](std::size_t b) { backward_one(p, b, out, lse, dout, dq, dk, dv); });
}

template <class T>
void attention_weights(const AttentionProblem<T>& p, const T* lse, T* weights) {
  parallel_for(p.batches, work_of(p), [&](std::size_t b) { weights_one(p, b, lse, weights); });
}

#define XGRAD_INSTANTIATE(T)                                                                            \
  template void attention_forward<T>(const AttentionProblem<T>&, T*, T*);                               \
  template void attention_backward<T>(const AttentionProblem<T>&, const T*, const T*, const T*, T*, T*, \
                                      T*);                                                              \
  template void attention_weights<T>(const AttentionProblem<T>&, const T*, T*);
XGRAD_INSTANTIATE(float)
XGRAD_INSTANTIATE(double)
#undef XGRAD_INSTANTIATE

}  // namespace xgrad::kernels
