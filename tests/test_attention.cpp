#define BOOST_TEST_MODULE attention
// The fused scaled_dot_product_attention op against the same computation composed from
// plain ops, plus float64 gradient checks of every option.
#include "helpers.hpp"

#include <limits>

#include "xgrad/autograd/denormals.hpp"
#include "xgrad/autograd/precision.hpp"
#include "xgrad/nn/nn.hpp"

using namespace xgrad;
using namespace xgrad::test;

using Inputs = std::vector<Tensor>;

namespace {

const double inf = std::numeric_limits<double>::infinity();

// softmax(q k^T * scale + additive, masked) v, written the textbook way.
Tensor reference(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  const std::size_t dk = q.shape().back(), lq = q.size(-2), lk = k.size(-2);
  Tensor scores = matmul(q, k, false, true) * (o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(dk)));
  if (o.additive_mask.defined()) scores = scores + o.additive_mask.to(q.dtype());
  if (o.mask.defined()) scores = masked_fill(scores, eq(o.mask.to(q.dtype()), 0.0), -inf);
  if (o.is_causal) {
    std::vector<double> future(lq * lk);
    for (std::size_t i = 0; i < lq; ++i)
      for (std::size_t j = 0; j < lk; ++j) future[i * lk + j] = j > i || (o.window > 0 && j + o.window <= i);
    scores = masked_fill(scores, Tensor::from_vector(future, {lq, lk}, q.dtype()), -inf);
  }
  return matmul(softmax(scores, -1), v);
}

struct Case {
  std::string name;
  Shape q, k, v;
  AttentionOptions options;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"plain", {2, 5, 4}, {2, 7, 4}, {2, 7, 4}, {}});
  c.push_back({"dk != dv", {2, 5, 4}, {2, 7, 4}, {2, 7, 6}, {}});
  c.push_back({"heads and broadcast k/v", {2, 3, 5, 4}, {1, 3, 6, 4}, {3, 6, 2}, {}});
  c.push_back({"longer than one block", {1, 70, 3}, {1, 130, 3}, {1, 130, 2}, {}});
  AttentionOptions o;
  o.mask = random_keep({7}, 1, 0.7);
  c.push_back({"key mask [Lk]", {2, 5, 4}, {2, 7, 4}, {2, 7, 3}, o});
  o.mask = random_keep({5, 7}, 2, 0.7);
  c.push_back({"mask [Lq, Lk]", {2, 5, 4}, {2, 7, 4}, {2, 7, 3}, o});
  o.mask = random_keep({2, 1, 1, 7}, 3, 0.7, DType::float32);
  c.push_back({"float32 mask [N, 1, 1, Lk]", {2, 3, 5, 4}, {2, 3, 7, 4}, {2, 3, 7, 3}, o});
  o.mask = random_keep({2, 3, 5, 7}, 4, 0.7);
  c.push_back({"mask [N, H, Lq, Lk]", {2, 3, 5, 4}, {2, 3, 7, 4}, {2, 3, 7, 3}, o});
  o = {};
  o.additive_mask = uniform64({5, 7}, -2, 2, 5, false);
  c.push_back({"additive mask", {2, 5, 4}, {2, 7, 4}, {2, 7, 3}, o});
  o.mask = random_keep({2, 1, 7}, 6, 0.7);
  c.push_back({"keep and additive masks", {2, 5, 4}, {2, 7, 4}, {2, 7, 3}, o});
  o = {};
  o.is_causal = true;
  c.push_back({"causal", {2, 6, 4}, {2, 6, 4}, {2, 6, 3}, o});
  c.push_back({"causal Lq < Lk", {1, 4, 3}, {1, 9, 3}, {1, 9, 2}, o});
  c.push_back({"causal Lq > Lk", {1, 9, 3}, {1, 4, 3}, {1, 4, 2}, o});
  c.push_back({"causal across blocks", {1, 80, 2}, {1, 80, 2}, {1, 80, 2}, o});
  // Kernel blocks are 128 x 128: several of each, and key blocks that no query reaches
  // (their gradients must still be written as zeros).
  c.push_back({"causal, several query and key blocks", {1, 140, 1}, {1, 140, 1}, {1, 140, 1}, o});
  c.push_back({"causal, key blocks no query sees", {1, 3, 1}, {1, 270, 1}, {1, 270, 1}, o});
  // A sliding window: within a block, one, several key blocks skipped before it.
  o.window = 3;
  c.push_back({"window 3", {2, 9, 4}, {2, 9, 4}, {2, 9, 3}, o});
  c.push_back({"window 3, Lq < Lk", {1, 5, 3}, {1, 9, 3}, {1, 9, 2}, o});
  o.window = 1;
  c.push_back({"window 1: itself alone", {2, 6, 4}, {2, 6, 4}, {2, 6, 3}, o});
  o.window = 130;
  c.push_back({"window across blocks", {1, 300, 1}, {1, 300, 1}, {1, 300, 1}, o});
  o = {};
  o.scale = 0.3;
  c.push_back({"explicit scale", {2, 5, 4}, {2, 7, 4}, {2, 7, 3}, o});
  return c;
}

}  // namespace

BOOST_AUTO_TEST_CASE(matches_the_composed_reference) {
  for (const Case& c : cases()) {
    const Tensor q = randn64(c.q, 1), k = randn64(c.k, 2), v = randn64(c.v, 3);
    const Tensor fused = scaled_dot_product_attention(q, k, v, c.options).output;
    const Tensor expected = reference(q, k, v, c.options);
    BOOST_TEST_CONTEXT(c.name) {
      BOOST_CHECK(fused.shape() == expected.shape());
      check_close(fused.to_vector(), expected.to_vector(), 1e-12);
    }
  }
}

BOOST_AUTO_TEST_CASE(gradients_of_every_option) {
  for (const Case& c : cases()) {
    BOOST_TEST_CONTEXT(c.name) {
      const AttentionOptions options = c.options;
      check_gradients(
          [options](const Inputs& in) { return scaled_dot_product_attention(in[0], in[1], in[2], options).output; },
          {randn64(c.q, 4), randn64(c.k, 5), randn64(c.v, 6)});
    }
  }
}

// The kernel's sliding window against the same band given as a mask, in every path
// (float64, float32, bf16 autocast in bundles and by blocks), with dropout and grouped
// heads: the key blocks it skips held only hidden keys, whose exact zeros add nothing,
// so the outputs and gradients are the same bits. Windows around the block sizes (128;
// 256 in bf16), none at all, and queries past every key's window (Lq > Lk + window).
BOOST_AUTO_TEST_CASE(a_sliding_window_is_its_band_mask_bit_for_bit) {
  struct Sizes {
    std::size_t lq, lk, window;
  };
  const std::vector<Sizes> sizes = {{300, 300, 1},   {300, 300, 5},   {300, 300, 127}, {300, 300, 128}, {300, 300, 129},
                                    {300, 300, 256}, {300, 300, 257}, {300, 300, 299}, {300, 300, 300}, {300, 300, 900},
                                    {40, 40, 7},     {300, 128, 5},   {100, 300, 30},  {600, 256, 10}};
  for (const Precision precision : {Precision::float32, Precision::bfloat16})
    for (const DType dtype : {DType::float64, DType::float32}) {
      if (dtype == DType::float64 && precision == Precision::bfloat16) continue;
      const AutocastGuard autocast(precision);
      for (const Sizes& n : sizes) {
        BOOST_TEST_CONTEXT(dtype_name(dtype) << (precision == Precision::bfloat16 ? " bf16" : "") << " Lq " << n.lq
                                             << " Lk " << n.lk << " window " << n.window) {
          std::vector<double> band(n.lq * n.lk);
          for (std::size_t i = 0; i < n.lq; ++i)
            for (std::size_t j = 0; j <= std::min(i, n.lk - 1); ++j) band[i * n.lk + j] = j + n.window > i;
          const auto run = [&](bool as_window) {
            Tensor q = randn64({2, 4, n.lq, 8}, 21).to(dtype).detach().requires_grad_();
            Tensor k = randn64({2, 2, n.lk, 8}, 22).to(dtype).detach().requires_grad_();
            Tensor v = randn64({2, 2, n.lk, 8}, 23).to(dtype).detach().requires_grad_();
            Generator generator(5);
            AttentionOptions o;
            o.is_causal = true, o.enable_gqa = true, o.dropout_p = 0.1, o.generator = &generator;
            o.need_weights = true;
            if (as_window)
              o.window = n.window;
            else
              o.mask = Tensor::from_vector(band, {n.lq, n.lk});
            const AttentionOutput r = scaled_dot_product_attention(q, k, v, o);
            sum(r.output * randn64({2, 4, n.lq, 8}, 24, false).to(dtype)).backward();
            return std::vector<std::vector<double>>{r.output.to_vector(), r.weights.to_vector(), q.grad().to_vector(),
                                                    k.grad().to_vector(), v.grad().to_vector()};
          };
          const auto windowed = run(true), masked = run(false);
          for (std::size_t t = 0; t < windowed.size(); ++t) BOOST_CHECK(windowed[t] == masked[t]);
        }
      }
    }
}

BOOST_AUTO_TEST_CASE(fully_masked_rows_give_zeros_and_zero_gradient) {
  for (DType dtype : {DType::float32, DType::float64}) {
    // Row 1 of batch 0 sees no key: by the keep mask, and in a second run by additive -inf.
    std::vector<double> keep(2 * 3 * 4, 1.0);
    for (int j = 0; j < 4; ++j) keep[1 * 4 + j] = 0.0;
    const Tensor mask = Tensor::from_vector(keep, {2, 3, 4}, dtype);
    const Tensor additive = masked_fill(Tensor::zeros({2, 3, 4}, dtype), eq(mask, 0.0), -inf);
    AttentionOptions by_mask, by_additive;
    by_mask.mask = mask;
    by_additive.additive_mask = additive;
    for (const AttentionOptions& options : {by_mask, by_additive}) {
      Tensor q = randn64({2, 3, 5}, 7).to(dtype).detach().requires_grad_();
      Tensor k = randn64({2, 4, 5}, 8).to(dtype).detach().requires_grad_();
      Tensor v = randn64({2, 4, 5}, 9).to(dtype).detach().requires_grad_();
      AttentionOptions with_weights = options;
      with_weights.need_weights = true;
      const AttentionOutput r = scaled_dot_product_attention(q, k, v, with_weights);
      const auto out = r.output.to_vector();
      for (double x : out) BOOST_CHECK(std::isfinite(x));
      for (int d = 0; d < 5; ++d) BOOST_CHECK_EQUAL(out[1 * 5 + d], 0.0);
      for (int j = 0; j < 4; ++j) BOOST_CHECK_EQUAL(r.weights.to_vector()[1 * 4 + j], 0.0);
      sum(r.output * r.output).backward();
      for (const Tensor* t : {&q, &k, &v})
        for (double g : t->grad().to_vector()) BOOST_CHECK(std::isfinite(g));
      for (int d = 0; d < 5; ++d) BOOST_CHECK_EQUAL(q.grad().to_vector()[1 * 5 + d], 0.0);
    }
  }
  // And the gradient check agrees (a fully masked row is a constant zero).
  AttentionOptions o;
  o.mask = Tensor::from_vector({1, 1, 0, 0, 0, 0, 1, 0}, {4, 2}, DType::float64);
  check_gradients([o](const Inputs& in) { return scaled_dot_product_attention(in[0], in[1], in[2], o).output; },
                  {randn64({4, 3}, 10), randn64({2, 3}, 11), randn64({2, 3}, 12)});
}

BOOST_AUTO_TEST_CASE(a_finite_mask_value_is_not_a_fully_masked_row) {
  // An additive -1e9 on every key shifts the whole row: softmax is unchanged (in
  // PyTorch too), so the row is not hidden, and stays finite.
  AttentionOptions o;
  o.additive_mask = Tensor::full({1, 3}, -1e9, DType::float64);
  const Tensor q = randn64({1, 1, 2}, 14, false), k = randn64({1, 3, 2}, 15, false), v = randn64({1, 3, 2}, 13, false);
  check_close(scaled_dot_product_attention(q, k, v, o).output.to_vector(),
              scaled_dot_product_attention(q, k, v).output.to_vector(), 1e-6);
}

// A row whose every key gets one large finite fill (the Annotated Transformer's -1e9, or
// the dtype's lowest, as Hugging Face's masks) is the softmax of its filled scores, as in
// PyTorch: its weights sum to 1 and its gradients are the composed reference's. (Its
// log-sum-exp, summed, had rounded the log away beside the fill: every weight was 1, and
// the gradients S times too large.) One key block and several.
BOOST_AUTO_TEST_CASE(a_row_a_finite_fill_hides_throughout_keeps_its_softmax) {
  for (const DType dtype : {DType::float64, DType::float32})
    for (const double fill :
         {-1e9, dtype == DType::float64 ? std::numeric_limits<double>::lowest()
                                        : static_cast<double>(std::numeric_limits<float>::lowest())})
      for (const std::size_t lk : {std::size_t{5}, std::size_t{130}}) {
        BOOST_TEST_CONTEXT(dtype_name(dtype) << ", fill " << fill << ", " << lk << " keys") {
          // Query row 1 hidden throughout; row 0 not at all; row 2 at its first key.
          std::vector<double> fills(3 * lk, 0.0);
          for (std::size_t j = 0; j < lk; ++j) fills[lk + j] = fill;
          fills[2 * lk] = fill;
          AttentionOptions o;
          o.additive_mask = Tensor::from_vector(fills, {3, lk}, dtype);
          o.need_weights = true;
          const Tensor q0 = randn64({2, 3, 4}, 21, false).to(dtype), k0 = randn64({2, lk, 4}, 22, false).to(dtype),
                       v0 = randn64({2, lk, 3}, 23, false).to(dtype), seed = randn64({2, 3, 3}, 24, false).to(dtype);
          const auto leaves = [&] {
            return std::vector<Tensor>{q0.detach().requires_grad_(), k0.detach().requires_grad_(),
                                       v0.detach().requires_grad_()};
          };
          const std::vector<Tensor> fused = leaves(), composed = leaves();
          const AttentionOutput out = scaled_dot_product_attention(fused[0], fused[1], fused[2], o);
          out.output.backward(seed);
          const Tensor expected = reference(composed[0], composed[1], composed[2], o);
          expected.backward(seed);
          const double tolerance = dtype == DType::float64 ? 1e-6 : 1e-5;  // -1e9's ulp in float64 is 1.2e-7
          check_close(out.output.to_vector(), expected.to_vector(), tolerance);
          const std::vector<double> weights = out.weights.to_vector();
          for (std::size_t row = 0; row < 6; ++row) {
            double total = 0;
            for (std::size_t j = 0; j < lk; ++j) total += weights[row * lk + j];
            BOOST_CHECK_CLOSE(total, 1.0, 1e-3);
          }
          for (std::size_t i = 0; i < 3; ++i)
            check_close(fused[i].grad().to_vector(), composed[i].grad().to_vector(), tolerance);
        }
      }
}

BOOST_AUTO_TEST_CASE(weights_are_the_probabilities) {
  AttentionOptions o;
  o.mask = random_keep({2, 5, 7}, 16, 0.7);
  o.is_causal = true;
  o.need_weights = true;
  const Tensor q = randn64({2, 5, 4}, 17), k = randn64({2, 7, 4}, 18), v = randn64({2, 7, 3}, 19);
  const AttentionOutput r = scaled_dot_product_attention(q, k, v, o);
  BOOST_CHECK(r.weights.shape() == (Shape{2, 5, 7}));
  BOOST_CHECK(r.weights.requires_grad());  // a loss may go through them
  check_close(matmul(r.weights, v).to_vector(), r.output.to_vector(), 1e-12);
  const auto w = r.weights.to_vector(), keep = o.mask.to_vector();
  for (std::size_t row = 0; row < 10; ++row) {
    double total = 0;
    bool any = false;
    for (std::size_t j = 0; j < 7; ++j) {
      const std::size_t i = row % 5;
      if (keep[row * 7 + j] == 0 || j > i)
        BOOST_CHECK_EQUAL(w[row * 7 + j], 0.0);
      else
        any = true;
      total += w[row * 7 + j];
    }
    BOOST_CHECK_CLOSE(total, any ? 1.0 : 0.0, 1e-10);
  }
  // Asking for weights changes nothing about the output or its gradient.
  check_gradients([o](const Inputs& in) { return scaled_dot_product_attention(in[0], in[1], in[2], o).output; },
                  {q, k, v});
}

BOOST_AUTO_TEST_CASE(dropout_on_the_probabilities) {
  const Tensor q = randn64({2, 6, 4}, 20), k = randn64({2, 9, 4}, 21), v = randn64({2, 9, 3}, 22);
  AttentionOptions o;
  o.dropout_p = 0.3;
  o.need_weights = true;
  Generator g1(5), g2(5);
  o.generator = &g1;
  const AttentionOutput a = scaled_dot_product_attention(q, k, v, o);
  o.generator = &g2;
  const AttentionOutput b = scaled_dot_product_attention(q, k, v, o);
  BOOST_CHECK(a.output.to_vector() == b.output.to_vector());  // same seed, same mask
  // Each weight is dropped or scaled by 1 / (1 - p); the output uses exactly those.
  AttentionOptions plain;
  plain.need_weights = true;
  const auto p = scaled_dot_product_attention(q, k, v, plain).weights.to_vector();
  const auto w = a.weights.to_vector();
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (w[i] == 0.0)
      ++dropped;
    else
      BOOST_CHECK_CLOSE(w[i], p[i] / 0.7, 1e-9);
  }
  BOOST_CHECK(dropped > 15 && dropped < 60);  // about 32 of 108
  check_close(matmul(a.weights, v).to_vector(), a.output.to_vector(), 1e-12);
  check_gradients(
      [](const Inputs& in) {
        Generator fixed(9);
        AttentionOptions d;
        d.dropout_p = 0.3;
        d.generator = &fixed;
        return scaled_dot_product_attention(in[0], in[1], in[2], d).output;
      },
      {q, k, v});
}

BOOST_AUTO_TEST_CASE(float32_agrees_with_float64) {
  const Tensor q = randn64({2, 70, 8}, 23, false), k = randn64({2, 90, 8}, 24, false),
               v = randn64({2, 90, 5}, 25, false);
  AttentionOptions o;
  o.is_causal = true;
  const auto r64 = scaled_dot_product_attention(q, k, v, o).output.to_vector();
  const auto r32 = scaled_dot_product_attention(q.to(DType::float32), k.to(DType::float32), v.to(DType::float32), o)
                       .output.to_vector();
  double scale = 0, worst = 0;
  for (std::size_t i = 0; i < r64.size(); ++i) {
    scale = std::max(scale, std::abs(r64[i]));
    worst = std::max(worst, std::abs(r64[i] - r32[i]));
  }
  BOOST_CHECK(worst <= 1e-5 * scale);
}

// The float32 kernel's exponentials (a vectorised exp of its own on AVX-512) against
// float64: with v the identity the output is the probability row itself. Scores spread
// over [-100, 0] below the row maximum (probabilities down to the subnormals), rows of
// every length up to past two blocks (vector tails), each probability within a few ulp:
// with denormals kept, every one; flushed (the default), every normal one, and those
// below float's smallest normal (within a rounding of it) zero or within the same bound.
namespace {

void check_float32_probabilities(bool flush) {
  constexpr double kSmallestNormal = std::numeric_limits<float>::min();
  const bool saved = flush_denormal();
  set_flush_denormal(flush);
  for (std::size_t n : {1, 2, 15, 16, 17, 31, 33, 127, 128, 129, 300}) {
    std::vector<double> keys(n), identity(n * n, 0.0);
    for (std::size_t j = 0; j < n; ++j) {
      keys[j] = n == 1 ? 0.0 : -100.0 * static_cast<double>((j * 7919) % n) / static_cast<double>(n - 1);
      identity[j * n + j] = 1.0;
    }
    AttentionOptions o;
    o.scale = 1.0;
    const Tensor q = Tensor::from_vector({1.0}, {1, 1, 1}, DType::float32);
    const Tensor k = Tensor::from_vector(keys, {1, n, 1}, DType::float32);
    const Tensor v = Tensor::from_vector(identity, {1, n, n}, DType::float32);
    const auto p = scaled_dot_product_attention(q, k, v, o).output.to_vector();
    double sum = 0;
    for (std::size_t j = 0; j < n; ++j) sum += std::exp(static_cast<double>(static_cast<float>(keys[j])));
    for (std::size_t j = 0; j < n; ++j) {
      const double expected = std::exp(static_cast<double>(static_cast<float>(keys[j]))) / sum;
      BOOST_TEST_CONTEXT("n = " << n << ", key " << j << " (score " << keys[j] << ", flush " << flush << ")") {
        const bool accurate = std::abs(p[j] - expected) <= 4e-7 * expected + 1e-44;
        if (flush && expected < kSmallestNormal * (1 + 1e-6))
          BOOST_CHECK(p[j] == 0.0 || (accurate && p[j] >= kSmallestNormal));
        else
          BOOST_CHECK(accurate);
      }
    }
  }
  set_flush_denormal(saved);
}

}  // namespace

BOOST_AUTO_TEST_CASE(float32_probabilities_are_accurate) {
  check_float32_probabilities(false);
  check_float32_probabilities(true);
}

BOOST_AUTO_TEST_CASE(large_scores_stay_finite) {
  const Tensor q = randn64({1, 4, 8}, 26, false) * 1e3, k = randn64({1, 5, 8}, 27, false) * 1e3;
  const Tensor v = randn64({1, 5, 3}, 28, false);
  for (DType dtype : {DType::float32, DType::float64})
    for (double x : scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype)).output.to_vector())
      BOOST_CHECK(std::isfinite(x));
}

BOOST_AUTO_TEST_CASE(bad_input_names_the_op_and_shapes) {
  const Tensor q = randn64({2, 5, 4}, 29), k = randn64({2, 7, 4}, 30), v = randn64({2, 7, 3}, 31);
  check_error(
      [&] {
        scaled_dot_product_attention(q, randn64({2, 7, 5}, 32), v);
      },
      {"scaled_dot_product_attention", "q [2, 5, 4]", "k [2, 7, 5]"});
  check_error([&] { scaled_dot_product_attention(q, k, randn64({2, 6, 3}, 33)); }, {"lengths differ", "v [2, 6, 3]"});
  check_error(
      [&] {
        scaled_dot_product_attention(q, randn64({3, 7, 4}, 34), randn64({3, 7, 3}, 35));
      },
      {"leading axes", "[3, 7, 4]"});
  AttentionOptions o;
  o.mask = Tensor::ones({5, 6});
  check_error([&] { scaled_dot_product_attention(q, k, v, o); }, {"mask of shape [5, 6]", "[..., 5, 7]"});
  o = {};
  o.dropout_p = 1.0;
  check_error([&] { scaled_dot_product_attention(q, k, v, o); }, {"dropout_p"});
  // A bias that requires grad would never train: refused, through the heads-in-place form
  // and MultiHeadAttention's attn_bias too; detached, or under no_grad, it is a constant.
  o = {};
  o.additive_mask = randn64({5, 7}, 36).requires_grad_();
  check_error([&] { scaled_dot_product_attention(q, k, v, o); },
              {"scaled_dot_product_attention", "additive_mask [5, 7] requires grad", "detach()"});
  const Tensor x = randn64({2, 5, 6}, 37);
  AttentionOptions square;
  square.additive_mask = randn64({5, 5}, 39).requires_grad_();
  check_error([&] { multi_head_attention({x}, {x}, {x}, std::size_t{2}, true, square); },
              {"additive_mask [5, 5] requires grad"});
  nn::MultiHeadAttention attention(nn::MultiHeadAttentionOptions{.embed_dim = 6, .num_heads = 2});
  attention.to(DType::float64);
  nn::AttentionArgs args;
  args.attn_bias = randn64({5, 5}, 38).requires_grad_();
  check_error([&] { attention.forward(x, x, x, args); }, {"requires grad"});
  {
    const NoGradGuard no_grad;
    BOOST_CHECK_NO_THROW(scaled_dot_product_attention(q, k, v, o));
  }
  o.additive_mask = o.additive_mask.detach();
  BOOST_CHECK_NO_THROW(scaled_dot_product_attention(q, k, v, o));
  o = {};
  o.window = 4;  // a causal window: without is_causal it would say nothing of the future
  check_error([&] { scaled_dot_product_attention(q, k, v, o); },
              {"scaled_dot_product_attention", "window = 4", "is_causal"});
  check_error([&] { scaled_dot_product_attention(q, k.to(DType::float32), v); }, {"dtype", "float32"});
  check_error([&] { scaled_dot_product_attention(randn64({4}, 36), k, v); }, {"at least 2 axes"});
}

// ---- multi_head_attention: heads read and written in place ----

namespace {

// The same attention composed the long way: slice the columns, split and permute the
// heads, attend, permute and merge back.
Tensor heads_reference(const Columns& q, const Columns& k, const Columns& v, std::size_t heads, bool batch_first,
                       const AttentionOptions& o) {
  const auto to_heads = [&](const Columns& c) {
    const std::size_t width = c.width ? c.width : c.tensor.shape()[2] - c.begin;
    const Tensor part = slice(c.tensor, 2, c.begin, c.begin + width);
    const Shape s = part.shape();
    const auto i = [](std::size_t x) { return static_cast<std::int64_t>(x); };
    const Tensor split = reshape(part, {i(s[0]), i(s[1]), i(heads), i(width / heads)});
    return batch_first ? permute(split, {0, 2, 1, 3}) : permute(split, {1, 2, 0, 3});  // [N, H, L, d]
  };
  const Tensor out = scaled_dot_product_attention(to_heads(q), to_heads(k), to_heads(v), o).output;
  const Tensor by_position = batch_first ? permute(out, {0, 2, 1, 3}) : permute(out, {2, 0, 1, 3});
  const Shape t = by_position.shape();
  return reshape(by_position, {static_cast<std::int64_t>(t[0]), static_cast<std::int64_t>(t[1]), -1});
}

struct HeadsCase {
  std::string name;
  bool batch_first;
  std::size_t heads;
  AttentionOptions options;
};

std::vector<HeadsCase> heads_cases() {
  std::vector<HeadsCase> c;
  c.push_back({"batch first", true, 2, {}});
  c.push_back({"sequence first", false, 2, {}});
  AttentionOptions o;
  o.is_causal = true;
  c.push_back({"causal, one head", true, 1, o});
  o = {};
  o.mask = random_keep({2, 1, 1, 5}, 11, 0.6);  // a key mask [N, 1, 1, S]
  c.push_back({"key mask, sequence first", false, 2, o});
  o.mask = random_keep({2, 2, 5, 5}, 12, 0.6);  // per-head masks, some rows fully hidden
  o.additive_mask = uniform64({5, 5}, -1, 1, 13, false);
  c.push_back({"per-head and additive masks", true, 2, o});
  return c;
}

}  // namespace

BOOST_AUTO_TEST_CASE(heads_in_place_match_split_heads) {
  for (const HeadsCase& hc : heads_cases()) {
    BOOST_TEST_CONTEXT(hc.name) {
      const Shape x_shape = hc.batch_first ? Shape{2, 5, 18} : Shape{5, 2, 18};
      // One fused tensor: q in columns [0, 4), k in [4, 8), v in [8, 14) (dv = 3 per head).
      const Tensor qkv = randn64(x_shape, 21);
      const Columns q{qkv, 0, 4}, k{qkv, 4, 4}, v{qkv, 8, 6};
      check_close(multi_head_attention(q, k, v, hc.heads, hc.batch_first, hc.options).output.to_vector(),
                  heads_reference(q, k, v, hc.heads, hc.batch_first, hc.options).to_vector());
      check_gradients(
          [&](const Inputs& in) {
            return multi_head_attention({in[0], 0, 4}, {in[0], 4, 4}, {in[0], 8, 6}, hc.heads, hc.batch_first,
                                        hc.options)
                .output;
          },
          {qkv});
      // Three tensors, cross-attention (key length 5 as the masks expect, query length 3
      // where the masks allow it).
      const Shape k_shape = x_shape, q_shape = hc.batch_first ? Shape{2, 3, 4} : Shape{3, 2, 4};
      const Tensor tq = randn64(q_shape, 22), tk = randn64(k_shape, 23), tv = randn64(k_shape, 24);
      AttentionOptions o = hc.options;
      if (o.mask.defined() && o.mask.shape()[2] != 1) o.mask = Tensor();
      if (o.additive_mask.defined()) o.additive_mask = Tensor();
      check_close(multi_head_attention({tq}, {tk, 2, 4}, {tv, 10, 8}, hc.heads, hc.batch_first, o).output.to_vector(),
                  heads_reference({tq}, {tk, 2, 4}, {tv, 10, 8}, hc.heads, hc.batch_first, o).to_vector());
      check_gradients(
          [&](const Inputs& in) {
            return multi_head_attention({in[0]}, {in[1], 2, 4}, {in[2], 10, 8}, hc.heads, hc.batch_first, o).output;
          },
          {tq, tk, tv});
    }
  }
}

// q = k = v = x, the same columns three times: each role's gradient is added, not overwritten.
BOOST_AUTO_TEST_CASE(heads_in_place_with_one_tensor_in_every_role) {
  const Tensor x = randn64({2, 4, 6}, 31);
  check_close(multi_head_attention({x}, {x}, {x}, 3, true).output.to_vector(),
              heads_reference({x}, {x}, {x}, 3, true, {}).to_vector());
  check_gradients([](const Inputs& in) { return multi_head_attention({in[0]}, {in[0]}, {in[0]}, 3, true).output; },
                  {x});
  // Overlapping, not identical, ranges.
  check_gradients(
      [](const Inputs& in) {
        return multi_head_attention({in[0], 0, 4}, {in[0], 2, 4}, {in[0]}, 2, true).output;
      },
      {x});
}

BOOST_AUTO_TEST_CASE(heads_in_place_weights_and_dropout_match_split_heads) {
  const Tensor qkv = randn64({2, 6, 12}, 41, false);
  AttentionOptions o;
  o.need_weights = true;
  o.dropout_p = 0.3;
  Generator g1(5), g2(5);
  o.generator = &g1;
  const AttentionOutput in_place = multi_head_attention({qkv, 0, 4}, {qkv, 4, 4}, {qkv, 8, 4}, 2, true, o);
  o.generator = &g2;
  const auto heads = [&](std::size_t begin) {
    return permute(reshape(slice(qkv, 2, begin, begin + 4), {2, 6, 2, 2}), {0, 2, 1, 3});
  };
  const AttentionOutput split = scaled_dot_product_attention(heads(0), heads(4), heads(8), o);
  BOOST_TEST(in_place.weights.shape() == (Shape{2, 2, 6, 6}));
  check_close(in_place.weights.to_vector(), split.weights.to_vector());
  check_close(in_place.output.to_vector(), reshape(permute(split.output, {0, 2, 1, 3}), {2, 6, 4}).to_vector());
}

BOOST_AUTO_TEST_CASE(heads_in_place_reject_bad_layouts) {
  const Tensor x = randn64({2, 5, 12}, 51, false), y = randn64({3, 5, 12}, 52, false);
  const char* op = "multi_head_attention";
  check_error([&] { multi_head_attention({x, 0, 4}, {x, 4, 4}, {x, 8, 4}, 3, true); }, {op, "[2, 5, 12]", "heads 3"});
  check_error([&] { multi_head_attention({x, 10, 4}, {x}, {x}, 2, true); }, {op, "columns [10, +4)"});
  // A range whose end wraps past 2^64 is outside too (once read memory before x).
  check_error([&] { multi_head_attention({x, SIZE_MAX - 1, 2}, {x, 0, 2}, {x, 2, 2}, 1, true); }, {op, "columns"});
  check_error(
      [&] {
        multi_head_attention({x, 0, 4}, {y, 0, 4}, {y, 4, 4}, 2, true);
      },
      {op, "[2, 5, 12]", "[3, 5, 12]"});
  check_error([&] { multi_head_attention({x, 0, 4}, {x, 4, 6}, {x, 8, 4}, 2, true); }, {op, "widths differ"});
  check_error([&] { multi_head_attention({randn64({5, 12}, 53)}, {x}, {x}, 2, true); }, {op, "[N, L, C]", "[5, 12]"});
  check_error([&] { multi_head_attention({x}, {x}, {x}, 0, true); }, {op, "heads must be positive"});
  AttentionOptions o;
  o.mask = random_keep({3, 1, 1, 5}, 54, 0.5);
  check_error([&] { multi_head_attention({x}, {x}, {x}, 2, true, o); }, {op, "mask [3, 1, 1, 5]", "[2, 2]"});
}

// docs/attention.md's multi_head_attention example, kept compiling and checked against the module.
BOOST_AUTO_TEST_CASE(readme_heads_in_place_example) {
  const std::size_t E = 8, heads = 2;
  nn::MultiHeadAttention attn(E, heads);
  attn.to(DType::float64);
  const Tensor x = randn64({2, 5, E}, 61, false);
  const Tensor in_proj_weight = attn.in_proj_weight, in_proj_bias = attn.in_proj_bias;
  const Tensor out_proj_weight = attn.out_proj->weight, out_proj_bias = attn.out_proj->bias;
  const AttentionOptions options;

  Tensor qkv = linear(x, in_proj_weight, in_proj_bias);  // x [N, L, E] -> [N, L, 3E]
  AttentionOutput r =
      multi_head_attention({qkv, 0, E}, {qkv, E, E}, {qkv, 2 * E, E}, heads, /*batch_first=*/true, options);
  Tensor y = linear(r.output, out_proj_weight, out_proj_bias);  // r.output [N, L, E]

  check_close(y.to_vector(), attn(x).to_vector());
}

// need_weights: a loss through the returned map backpropagates into q and k.
BOOST_AUTO_TEST_CASE(weights_carry_a_gradient) {
  for (const Case& c : cases()) {
    // A map's Jacobian is checked a row at a time: up to 140 x 140 (the window's skipped
    // blocks give the band mask's map bit for bit, a_sliding_window_is_its_band_mask_...).
    if (c.q[c.q.size() - 2] * c.k[c.k.size() - 2] > 140 * 140) continue;
    BOOST_TEST_CONTEXT(c.name) {
      AttentionOptions options = c.options;
      options.need_weights = true;
      check_gradients(
          [options](const Inputs& in) { return scaled_dot_product_attention(in[0], in[1], in[2], options).weights; },
          {randn64(c.q, 7), randn64(c.k, 8), randn64(c.v, 9)});
      // Both outputs in one loss (an attention penalty beside the task's loss).
      check_gradients(
          [options](const Inputs& in) {
            const AttentionOutput r = scaled_dot_product_attention(in[0], in[1], in[2], options);
            return sum(r.output) + sum(r.weights * r.weights);
          },
          {randn64(c.q, 10), randn64(c.k, 11), randn64(c.v, 12)});
    }
  }
  // The composed reference's map, gradient for gradient.
  AttentionOptions o;
  o.mask = random_keep({2, 5, 7}, 13, 0.6);
  o.need_weights = true;
  const Tensor q = randn64({2, 5, 4}, 14), k = randn64({2, 7, 4}, 15), v = randn64({2, 7, 3}, 16);
  const Tensor c = randn64({2, 5, 7}, 17, false);
  sum(scaled_dot_product_attention(q, k, v, o).weights * c).backward();
  const Tensor rq = q.detach().requires_grad_(), rk = k.detach().requires_grad_();
  Tensor scores = matmul(rq, rk, false, true) * 0.5;
  sum(softmax(masked_fill(scores, eq(o.mask, 0.0), -inf)) * c).backward();
  check_close(q.grad().to_vector(), rq.grad().to_vector(), 1e-12);
  check_close(k.grad().to_vector(), rk.grad().to_vector(), 1e-12);
  BOOST_CHECK(!v.grad().defined() || v.grad().to_vector() == std::vector<double>(v.numel(), 0.0));
}

BOOST_AUTO_TEST_CASE(weights_gradient_with_dropout_and_heads_in_place) {
  const auto dropped = [](double p) {
    AttentionOptions o;
    o.need_weights = true;
    o.dropout_p = p;
    return o;
  };
  check_gradients(
      [&](const Inputs& in) {
        Generator fixed(3);
        AttentionOptions o = dropped(0.3);
        o.generator = &fixed;
        return scaled_dot_product_attention(in[0], in[1], in[2], o).weights;
      },
      {randn64({2, 5, 4}, 18), randn64({2, 6, 4}, 19), randn64({2, 6, 3}, 20)});
  for (bool batch_first : {true, false}) {
    BOOST_TEST_CONTEXT("batch_first " << batch_first) {
      const Tensor qkv = randn64(batch_first ? Shape{2, 5, 12} : Shape{5, 2, 12}, 21);
      for (double p : {0.0, 0.25})
        check_gradients(
            [&](const Inputs& in) {
              Generator fixed(4);
              AttentionOptions o = dropped(p);
              o.generator = &fixed;
              o.is_causal = true;
              return multi_head_attention({in[0], 0, 4}, {in[0], 4, 4}, {in[0], 8, 4}, 2, batch_first, o).weights;
            },
            {qkv});
      // q and k overlapping columns of one tensor, and three separate tensors.
      check_gradients(
          [&](const Inputs& in) {
            return multi_head_attention({in[0], 0, 4}, {in[0], 2, 4}, {in[0]}, 2, batch_first, dropped(0)).weights;
          },
          {qkv});
      const Tensor tq = randn64(batch_first ? Shape{2, 3, 4} : Shape{3, 2, 4}, 22);
      check_gradients(
          [&](const Inputs& in) {
            return multi_head_attention({in[0]}, {in[1], 2, 4}, {in[1], 6, 6}, 2, batch_first, dropped(0)).weights;
          },
          {tq, qkv});
    }
  }
}
