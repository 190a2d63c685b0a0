#define BOOST_TEST_MODULE loss
#include "helpers.hpp"

#include <cmath>
#include <limits>

using namespace xgrad;
using namespace xgrad::test;

using Inputs = std::vector<Tensor>;

BOOST_AUTO_TEST_CASE(embedding_gathers_rows) {
  const Tensor w = Tensor::from_vector({0, 1, 10, 11, 20, 21}, {3, 2}, DType::float64);
  const Indices ids({2, 0, 2, 1}, {2, 2});
  const Tensor e = embedding(w, ids);
  BOOST_CHECK(e.shape() == (Shape{2, 2, 2}));
  check_close(e.to_vector(), {20, 21, 0, 1, 20, 21, 10, 11});
  // Repeated ids scatter-add into the same row.
  check_gradients([ids](const Inputs& in) { return embedding(in[0], ids); }, {randn64({3, 2}, 1)});
  check_error([&] { embedding(w, Indices({0, 3}, {2})); }, {"embedding", "id 3", "[3, 2]"});
  check_error([&] { embedding(w, Indices({-1}, {1})); }, {"embedding", "id -1"});
  check_error([&] { embedding(randn64({3}, 2), ids); }, {"embedding", "2-D", "[3]"});
}

BOOST_AUTO_TEST_CASE(cross_entropy_value) {
  const Tensor logits = Tensor::from_vector({1, 2, 3, 1, 1, 1}, {2, 3}, DType::float64);
  const Indices targets({2, 0}, {2});
  const double lse0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  const double expected = ((lse0 - 3.0) + std::log(3.0)) / 2.0;
  BOOST_CHECK_CLOSE(cross_entropy(logits, targets).item(), expected, 1e-12);
}

// Each row's maximum and log-sum run in SIMD batches with a scalar tail: rows of every
// width, far from zero, match a direct float64 log-sum-exp to 1e-12; a NaN anywhere in a
// row makes its loss NaN; -inf logits (masked classes) other than the target leave it
// finite; float32 within a few ulps of the float64 loss.
BOOST_AUTO_TEST_CASE(cross_entropy_rows_of_every_width_match_a_direct_log_sum) {
  for (const std::size_t classes : {1u, 7u, 16u, 17u, 100u, 5003u}) {
    const std::size_t rows = 6;
    std::vector<double> x = (randn64({rows, classes}, 40 + classes, false) * 5.0 + 1000.0).to_vector();
    std::vector<std::int64_t> t(rows);
    for (std::size_t r = 0; r < rows; ++r) t[r] = static_cast<std::int64_t>((r * 7919) % classes);
    if (classes > 1) x[1 * classes + (t[1] + 1) % classes] = -std::numeric_limits<double>::infinity();
    x[5 * classes + classes - 1] = std::nan("");
    const Tensor logits = Tensor::from_vector(x, {rows, classes}, DType::float64);
    const Indices targets(t, {rows});
    const std::vector<double> loss = cross_entropy(logits, targets, {.reduction = Reduction::none}).to_vector(),
                              loss32 = cross_entropy(logits.to(DType::float32), targets, {.reduction = Reduction::none})
                                           .to_vector();
    for (std::size_t r = 0; r < rows; ++r) {
      const double* row = x.data() + r * classes;
      double max = -std::numeric_limits<double>::infinity(), sum = 0;
      for (std::size_t c = 0; c < classes; ++c) max = std::max(max, row[c]);
      for (std::size_t c = 0; c < classes; ++c) sum += std::exp(row[c] - max);
      const double expected = std::log(sum) - (row[t[r]] - max);
      if (r == 5) {
        BOOST_TEST(std::isnan(loss[r]), classes << " classes: a NaN logit");
        BOOST_TEST(std::isnan(loss32[r]), classes << " classes: a NaN logit, float32");
        continue;
      }
      BOOST_TEST(std::abs(loss[r] - expected) <= 1e-12 * std::max(1.0, expected), classes << " classes, row " << r);
      // float32: the logits rounded (2^-24 of 1000 each) and a sum of `classes` terms.
      BOOST_TEST(std::abs(loss32[r] - expected) <= 1e-3 + 1e-6 * static_cast<double>(classes),
                 classes << " classes, row " << r << ", float32");
    }
  }
}

BOOST_AUTO_TEST_CASE(cross_entropy_gradients_with_ignore_index) {
  const Tensor logits = randn64({2, 3, 5}, 3);
  const Indices targets({4, 0, -100, 2, -100, 1}, {2, 3});
  check_gradients([targets](const Inputs& in) { return cross_entropy(in[0], targets); }, {logits});
  // Ignored positions neither count in the mean nor get gradient.
  const Indices only_first({4, -100, -100, -100, -100, -100}, {2, 3});
  const Tensor first_row = slice(reshape(logits, {6, 5}), 0, 0, 1);
  BOOST_CHECK_CLOSE(cross_entropy(logits, only_first).item(), cross_entropy(first_row, Indices({4}, {1})).item(),
                    1e-10);
  Tensor x = logits.detach().requires_grad_();
  cross_entropy(x, only_first).backward();
  const auto g = x.grad().to_vector();
  for (std::size_t i = 5; i < g.size(); ++i) BOOST_CHECK_EQUAL(g[i], 0.0);
  // A custom ignore value.
  const Indices custom({4, 0, 7, 2, 7, 1}, {2, 3});
  check_gradients([custom](const Inputs& in) { return cross_entropy(in[0], custom, 7); }, {logits});
}

BOOST_AUTO_TEST_CASE(cross_entropy_all_ignored_is_zero) {
  Tensor x = randn64({2, 3}, 4);
  Tensor loss = cross_entropy(x, Indices({-100, -100}, {2}));
  BOOST_CHECK_EQUAL(loss.item(), 0.0);
  loss.backward();
  check_close(x.grad().to_vector(), std::vector<double>(6, 0.0));
}

BOOST_AUTO_TEST_CASE(cross_entropy_braced_options_are_the_defaults) {
  // {} as the third argument is the default options, not ignore_index 0.
  const Tensor two = Tensor::from_vector({5, 0, 0, 5}, {2, 2}, DType::float64);
  const Indices zeros({0, 0}, {2});
  BOOST_CHECK_CLOSE(cross_entropy(two, zeros, {}).item(), cross_entropy(two, zeros).item(), 1e-12);
  BOOST_CHECK_GT(cross_entropy(two, zeros, {}).item(), 2.0);
}

BOOST_AUTO_TEST_CASE(cross_entropy_large_logits_stay_finite) {
  const Tensor logits = Tensor::from_vector({1e4, -1e4, 0, 0}, {1, 4}, DType::float32);
  BOOST_CHECK_SMALL(cross_entropy(logits, Indices({0}, {1})).item(), 1e-6);
  BOOST_CHECK_CLOSE(cross_entropy(logits, Indices({1}, {1})).item(), 2e4, 1e-4);
}

BOOST_AUTO_TEST_CASE(cross_entropy_errors) {
  const Tensor logits = randn64({2, 3}, 5);
  check_error([&] { cross_entropy(logits, Indices({0, 3}, {2})); }, {"cross_entropy", "target 3", "[2, 3]"});
  check_error([&] { cross_entropy(logits, Indices({0, 1, 2}, {3})); }, {"cross_entropy", "[3]", "[2, 3]"});
}

BOOST_AUTO_TEST_CASE(cross_entropy_options_gradients) {
  const Tensor logits = randn64({2, 3, 5}, 6);
  const Indices targets({4, 0, -100, 2, 2, 1}, {2, 3});
  const Tensor weight = add(uniform64({5}, 0.2, 1.5, 7, false), 0.0);
  for (Reduction reduction : {Reduction::none, Reduction::sum, Reduction::mean})
    for (double smoothing : {0.0, 0.3})
      for (bool weighted : {false, true}) {
        CrossEntropyOptions o;
        o.reduction = reduction;
        o.label_smoothing = smoothing;
        if (weighted) o.weight = weight;
        check_gradients([&](const Inputs& in) { return cross_entropy(in[0], targets, o); }, {logits});
        // Soft targets: gradients for the logits and the probabilities.
        const Tensor q = softmax(randn64({2, 3, 5}, 8, false)).requires_grad_();
        check_gradients([&](const Inputs& in) { return cross_entropy(in[0], in[1], o); }, {logits, q});
      }
  // PyTorch's layout: classes on axis 1 is the same loss as moving them last.
  CrossEntropyOptions axis1;
  axis1.class_axis = 1;
  axis1.reduction = Reduction::none;
  const Tensor moved = permute(logits, {0, 2, 1});  // [2, 5, 3]: classes on axis 1
  check_close(cross_entropy(moved, targets, axis1).to_vector(),
              cross_entropy(logits, targets, CrossEntropyOptions{.reduction = Reduction::none}).to_vector());
  BOOST_CHECK(cross_entropy(moved, targets, axis1).shape() == (Shape{2, 3}));
  check_gradients([&](const Inputs& in) { return cross_entropy(in[0], targets, axis1); }, {moved});
}

BOOST_AUTO_TEST_CASE(cross_entropy_option_values) {
  // Full smoothing is the cross-entropy against the uniform distribution; a one-hot soft
  // target equals the class target.
  const Tensor x = randn64({4, 6}, 9, false);
  const Indices t({1, 5, 0, 2}, {4});
  CrossEntropyOptions uniform;
  uniform.label_smoothing = 1.0;
  const double expected = -mean(sum(log_softmax(x), {-1})).item() / 6.0;
  BOOST_CHECK_CLOSE(cross_entropy(x, t, uniform).item(), expected, 1e-10);
  std::vector<double> one_hot(24, 0.0);
  for (std::size_t r = 0; r < 4; ++r) one_hot[r * 6 + static_cast<std::size_t>(t.values[r])] = 1.0;
  const Tensor q = Tensor::from_vector(one_hot, {4, 6}, DType::float64);
  BOOST_CHECK_CLOSE(cross_entropy(x, q).item(), cross_entropy(x, t).item(), 1e-10);
  // sum = mean * count; weighted mean divides by the weights of the counted targets.
  CrossEntropyOptions summed;
  summed.reduction = Reduction::sum;
  BOOST_CHECK_CLOSE(cross_entropy(x, t, summed).item(), 4 * cross_entropy(x, t).item(), 1e-10);
  CrossEntropyOptions weighted;
  weighted.weight = Tensor::from_vector({1, 2, 1, 1, 1, 3}, {6}, DType::float64);
  weighted.reduction = Reduction::none;
  const auto rows = cross_entropy(x, t, weighted).to_vector();
  weighted.reduction = Reduction::mean;
  BOOST_CHECK_CLOSE(cross_entropy(x, t, weighted).item(), (rows[0] + rows[1] + rows[2] + rows[3]) / 7.0, 1e-10);
  // Weights of the counted targets summing to 0: 0, not NaN.
  weighted.weight = Tensor::zeros({6}, DType::float64);
  BOOST_CHECK_EQUAL(cross_entropy(x, t, weighted).item(), 0.0);
}

// A class a soft target gives no mass adds nothing (0 log 0 = 0), even where its logit is
// -inf (a masked entry): the loss is the one without that class, never NaN.
BOOST_AUTO_TEST_CASE(cross_entropy_soft_target_of_no_mass_on_a_masked_class) {
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor masked = Tensor::from_vector({0.0, -inf, 1.0, 2.0, -1.0, -inf}, {2, 3}, DType::float64, true);
  const Tensor q = Tensor::from_vector({0.5, 0.0, 0.5, 0.25, 0.75, 0.0}, {2, 3}, DType::float64);
  const Tensor kept = Tensor::from_vector({0.0, 1.0, 2.0, -1.0}, {2, 2}, DType::float64, true);
  const Tensor q_kept = Tensor::from_vector({0.5, 0.5, 0.25, 0.75}, {2, 2}, DType::float64);
  const Tensor loss = cross_entropy(masked, q);
  BOOST_CHECK_CLOSE(loss.item(), cross_entropy(kept, q_kept).item(), 1e-12);
  loss.backward();
  cross_entropy(kept, q_kept).backward();
  const auto g = masked.grad().to_vector(), g_kept = kept.grad().to_vector();
  check_close({g[0], g[2], g[3], g[4]}, g_kept);
  BOOST_CHECK_EQUAL(g[1], 0.0);
  BOOST_CHECK_EQUAL(g[5], 0.0);
}

// The mean over many rows holds float32's precision: all-zero logits over 10 classes are
// ln 10 on every row (a float accumulator was 0.3% off at 400,000 rows).
BOOST_AUTO_TEST_CASE(cross_entropy_mean_of_many_float32_rows) {
  constexpr std::size_t rows = 400000;
  const Tensor logits = Tensor::zeros({rows, 10});
  const Indices targets(std::vector<std::int64_t>(rows, 3), {rows});
  BOOST_CHECK_CLOSE(cross_entropy(logits, targets).item(), std::log(10.0), 1e-5);
  CrossEntropyOptions summed;
  summed.reduction = Reduction::sum;
  BOOST_CHECK_CLOSE(cross_entropy(logits, targets, summed).item(), rows * std::log(10.0), 1e-5);
}

BOOST_AUTO_TEST_CASE(cross_entropy_option_errors) {
  const Tensor logits = randn64({2, 3}, 10);
  const Indices t({0, 1}, {2});
  CrossEntropyOptions o;
  o.label_smoothing = 1.5;
  check_error([&] { cross_entropy(logits, t, o); }, {"cross_entropy", "label_smoothing 1.5"});
  o = {};
  o.weight = Tensor::ones({4}, DType::float64);
  check_error([&] { cross_entropy(logits, t, o); }, {"cross_entropy", "weight", "[4]", "[3]"});
  o.weight = Tensor::ones({3}, DType::float32);
  check_error([&] { cross_entropy(logits, t, o); }, {"cross_entropy", "weight float32", "float64"});
  o = {};
  o.class_axis = 2;
  check_error([&] { cross_entropy(logits, t, o); }, {"cross_entropy", "axis 2", "[2, 3]"});
  o.class_axis = 0;
  check_error([&] { cross_entropy(logits, t, o); }, {"cross_entropy", "[2]", "axis 0", "expected targets [3]"});
  check_error([&] { cross_entropy(logits, randn64({3, 2}, 11)); }, {"cross_entropy", "probabilities", "[3, 2]"});
  check_error(
      [] {
        cross_entropy(Tensor::zeros({2, 0}), Indices({-100, -100}, {2}));
      },
      {"cross_entropy", "[2, 0]", "no class"});
  check_error([] { cross_entropy(Tensor::zeros({2, 0}), Tensor::zeros({2, 0})); }, {"cross_entropy", "no class"});
}
