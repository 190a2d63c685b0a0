// attention's bundle path: in bf16, short sequences' entries a bundle at a time, each block
// product one batched oneDNN call over the bundle (see runs_in_bundles).

#include <algorithm>
#include <memory>
#include <vector>

#include "xgrad/autograd/kernels/attention_steps.hpp"
#include "xgrad/autograd/kernels/gemm.hpp"
#include "xgrad/autograd/parallel.hpp"

namespace xgrad::kernels::attention_steps {

namespace {

// A bundle's scores are at most 64 KiB of float32 (backward keeps them, dP and both rounded
// to bf16 in an L2), and there are at least kMinBundles bundles where the batch allows, to
// share between threads. (Zen 5, medians of alternating runs: tiny's bf16 step 3.48 -> 2.87
// ms, lm's 1-3% faster, medium's unchanged within the noise.)
constexpr std::size_t kBundleScores = std::size_t{1} << 14;
constexpr std::size_t kMinBundles = 8;

// Entries a bundle, a multiple of the group; from the shape alone.
std::size_t bundle_size(const AttentionProblem<float>& p) {
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

void forward_bundle(const AttentionProblem<float>& p, std::size_t first, std::size_t count, float* out,
                    RowLogSumExp<float>* lse) {
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

void backward_bundle(const AttentionProblem<float>& p, std::size_t first, std::size_t count, const float* out,
                     const RowLogSumExp<float>* lse, const float* dout, float* dq, float* dk, float* dv) {
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
    score_gradient(p, first + e, 0, lq, 0, lk, probs.data() + e * block, delta.data() + e * lq, dp.data() + e * block);
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

// body(first, count) for each bundle of entries, in parallel.
template <class Body>
void for_each_bundle(const AttentionProblem<float>& p, double work_per_entry, Body&& body) {
  const std::size_t size = bundle_size(p), bundles = (p.batches + size - 1) / size;
  parallel_for(bundles, work_per_entry * static_cast<double>(size),
               [&](std::size_t i) { body(i * size, std::min(size, p.batches - i * size)); });
}

}  // namespace

// Short sequences in bf16, where an entry's scores are one block (lq <= kBlockQ, lk <=
// key_block), run in bundles of entries: each block product is one oneDNN call over the
// bundle (batched_gemm) instead of one call an entry, whose cost exceeded its arithmetic
// (64 x 64 x 32 products took 1.22-1.35 us a call in the lm recipe's step, against 0.81
// us each in a batch of 24: Zen 5, one thread). The arithmetic is the entry path's, on the
// same rounded operands; only the products' calls are other, so the bits may differ from
// it (as between any two product kernels), never between thread counts: bundles are cut
// from the shape alone. Each bundle holds whole K/V groups (dK and dV sum a group's query
// heads in order, as the entry path does).
bool runs_in_bundles(const AttentionProblem<float>& p) {
  return p.bf16 && p.lq > 0 && p.lk > 0 && p.lq <= kBlockQ && p.lk <= key_block(p);
}

void forward_in_bundles(const AttentionProblem<float>& p, float* out, RowLogSumExp<float>* lse) {
  for_each_bundle(p, work_of(p),
                  [&](std::size_t first, std::size_t count) { forward_bundle(p, first, count, out, lse); });
}

void backward_in_bundles(const AttentionProblem<float>& p, const float* out, const RowLogSumExp<float>* lse,
                         const float* dout, float* dq, float* dk, float* dv) {
  for_each_bundle(p, 2 * work_of(p), [&](std::size_t first, std::size_t count) {
    backward_bundle(p, first, count, out, lse, dout, dq, dk, dv);
  });
}

}  // namespace xgrad::kernels::attention_steps
