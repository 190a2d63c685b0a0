#define BOOST_TEST_MODULE reduce
#include "helpers.hpp"
#include "xgrad/autograd/precision.hpp"

using namespace xgrad;
using namespace xgrad::test;

using Inputs = std::vector<Tensor>;

BOOST_AUTO_TEST_CASE(sum_and_mean_values) {
  const Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, DType::float64);
  check_close(sum(x).to_vector(), {21});
  BOOST_CHECK(sum(x).shape().empty());
  check_close(sum(x, {0}).to_vector(), {5, 7, 9});
  check_close(sum(x, {1}).to_vector(), {6, 15});
  check_close(sum(x, {-1}, true).to_vector(), {6, 15});
  BOOST_CHECK(sum(x, {-1}, true).shape() == (Shape{2, 1}));
  BOOST_CHECK(sum(x, {0, 1}, true).shape() == (Shape{1, 1}));
  check_close(mean(x, {0}).to_vector(), {2.5, 3.5, 4.5});
  check_close(mean(x).to_vector(), {3.5});
  check_close(max(x, {1}).to_vector(), {3, 6});
  check_close(max(x).to_vector(), {6});
}

// float32 sums accumulate in double: a float accumulator stops growing at 2^24 ones (and
// drifts well before). Past 2^24 elements, every reduction built on the sum holds float32's
// own precision: half an ulp of the result, about 6e-8 relative.
BOOST_AUTO_TEST_CASE(float32_sums_of_millions_keep_float32_precision) {
  constexpr std::size_t n = (std::size_t{1} << 24) + 1000;
  const Tensor ones = Tensor::ones({n});
  BOOST_CHECK_EQUAL(sum(ones).item(), static_cast<double>(n));
  BOOST_CHECK_EQUAL(mean(ones).item(), 1.0);
  BOOST_CHECK_EQUAL(cumsum(ones, 0).to_vector().back(), static_cast<double>(n));
  // Along a kept inner axis (the input swept once, group by group) and over a leading one.
  const Tensor columns = Tensor::ones({n / 2, 2});
  check_close(sum(columns, {0}).to_vector(), {static_cast<double>(n / 2), static_cast<double>(n / 2)}, 0);
  // Uniform values: float32's result beside float64's, within float32's rounding.
  Generator gen(7);
  const Tensor u = Tensor::uniform({n}, 0.0, 1.0, gen);
  const Tensor u64 = u.to(DType::float64);
  BOOST_CHECK_CLOSE(sum(u).item(), sum(u64).item(), 1e-5);
  BOOST_CHECK_CLOSE(var(u).item(), var(u64).item(), 1e-5);
  BOOST_CHECK_CLOSE(stddev(u, 0).item(), stddev(u64, 0).item(), 1e-5);
}

// linear's bias gradient is a sum over rows too (its kernel's own, fused with the
// product's backward): 2^24 rows of float(0.1) in float32 and bf16 products alike.
BOOST_AUTO_TEST_CASE(linears_bias_gradient_keeps_float32_precision) {
  constexpr std::size_t rows = std::size_t{1} << 24;
  const double exact = static_cast<double>(0.1f) * rows;  // 1677721.625, a float32
  for (const bool bf16 : {false, true}) {
    const AutocastGuard precision(bf16 ? Precision::bfloat16 : Precision::float32);
    const Tensor x = Tensor::zeros({rows, 1});
    const Tensor w = Tensor::zeros({1, 1}).requires_grad_(), b = Tensor::zeros({1}).requires_grad_();
    linear(x, w, b).backward(Tensor::full({rows, 1}, 0.1));
    // Each 32 rows summed in float32 (a few ulps), the chunks in double: within 1e-6
    // relative (a float total was 0.4% off).
    BOOST_CHECK_CLOSE(b.grad().item(), exact, 1e-4);
  }
}

BOOST_AUTO_TEST_CASE(reduction_gradients_over_axis_sets) {
  const Tensor x = randn64({2, 3, 4}, 1);
  const std::vector<std::vector<int>> axis_sets = {{0}, {1}, {2}, {-1}, {0, 2}, {1, 2}, {0, 1, 2}};
  for (const auto& axes : axis_sets)
    for (bool keepdim : {false, true}) {
      check_gradients([&](const Inputs& in) { return sum(in[0], axes, keepdim); }, {x});
      check_gradients([&](const Inputs& in) { return mean(in[0], axes, keepdim); }, {x});
      check_gradients([&](const Inputs& in) { return max(in[0], axes, keepdim); }, {x});
    }
  check_gradients([](const Inputs& in) { return sum(in[0]); }, {x});
  check_gradients([](const Inputs& in) { return mean(in[0]); }, {x});
  check_gradients([](const Inputs& in) { return max(in[0]); }, {x});
}

BOOST_AUTO_TEST_CASE(max_sends_the_gradient_to_the_first_maximum) {
  const Tensor x = Tensor::from_vector({1, 3, 3, 2}, {4}, DType::float64, true);
  max(x).backward();
  check_close(x.grad().to_vector(), {0, 1, 0, 0});
}

BOOST_AUTO_TEST_CASE(reduction_errors) {
  const Tensor x = randn64({2, 3}, 2);
  check_error([&] { sum(x, {2}); }, {"sum", "axis 2", "[2, 3]"});
  check_error([&] { mean(x, {0, -2}); }, {"mean", "twice"});
  check_error([&] { max(Tensor::zeros({0, 3}), {0}); }, {"max", "empty", "[0, 3]"});
}

BOOST_AUTO_TEST_CASE(var_and_stddev) {
  const Tensor x = randn64({3, 4, 5}, 41);
  for (int correction : {0, 1}) {
    check_gradients([correction](const Inputs& in) { return var(in[0], {1}, correction); }, {x});
    check_gradients([correction](const Inputs& in) { return stddev(in[0], {0, 2}, correction, true); }, {x});
    check_gradients([correction](const Inputs& in) { return var(in[0], correction); }, {x});
    check_gradients([correction](const Inputs& in) { return stddev(in[0], correction); }, {x});
  }
  const Tensor v = Tensor::from_vector({1.0, 2.0, 3.0, 4.0}, {4}, DType::float64, true);
  check_close(var(v).to_vector(), {5.0 / 3.0});
  check_close(var(v, 0).to_vector(), {1.25});
  check_close(stddev(v).to_vector(), {std::sqrt(5.0 / 3.0)});
  BOOST_CHECK(var(x, {1}, 1, true).shape() == (Shape{3, 1, 5}));
  // A constant group: stddev 0 with gradient 0, never NaN.
  const Tensor flat = Tensor::full({3}, 2.0, DType::float64).requires_grad_();
  stddev(flat).backward();
  check_close(flat.grad().to_vector(), {0.0, 0.0, 0.0});
  check_error([&] { var(Tensor::ones({1}, DType::float64)); }, {"var", "1 elements", "[1]", "correction 1"});
  check_error([&] { stddev(x, {1}, 4); }, {"stddev", "4 elements", "degrees of freedom"});
  check_error([&] { var(x, {1}, -1); }, {"var", "correction -1"});
}

BOOST_AUTO_TEST_CASE(a_braced_axis_is_an_axis_not_a_correction) {
  const Tensor x = Tensor::from_vector({1, 2, 3, 10, 20, 30}, {2, 3}, DType::float64);
  const Tensor by_row = var(x, {1});
  BOOST_CHECK(by_row.shape() == Shape{2});
  check_close(by_row.to_vector(), {1.0, 100.0});
  BOOST_CHECK(stddev(x, {0}).shape() == Shape{3});
  check_close(var(x, 0).to_vector(), var(x, {0, 1}, 0).to_vector());  // a plain number is a correction
  check_close(stddev(x, 1).to_vector(), stddev(x).to_vector());
}

BOOST_AUTO_TEST_CASE(cumsum_values_and_gradients) {
  const Tensor x = randn64({3, 4, 2}, 42);
  for (int axis : {0, 1, 2, -1}) check_gradients([axis](const Inputs& in) { return cumsum(in[0], axis); }, {x});
  const Tensor v = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, DType::float64);
  check_close(cumsum(v, 1).to_vector(), {1, 3, 6, 4, 9, 15});
  check_close(cumsum(v, 0).to_vector(), {1, 2, 3, 5, 7, 9});
  check_error([&] { cumsum(v, 2); }, {"cumsum", "axis 2", "[2, 3]"});
  check_error([&] { cumsum(Tensor::scalar(1.0), 0); }, {"cumsum", "scalar"});
}

BOOST_AUTO_TEST_CASE(argmax_argmin_first_extreme_and_nan) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = Tensor::from_vector({1, 3, 3, -2, 0.5, nan, -1, 7}, {2, 4}, DType::float64);
  BOOST_CHECK(argmax(x, 1).values == (std::vector<std::int64_t>{1, 1}));  // NaN counts as the largest
  BOOST_CHECK(argmin(x, 1).values == (std::vector<std::int64_t>{3, 1}));  // ... and the smallest
  BOOST_CHECK(argmax(x, 1).shape == (Shape{2}));
  BOOST_CHECK(argmax(x, 0, true).shape == (Shape{1, 4}));
  BOOST_CHECK(argmax(x, 0, true).values == (std::vector<std::int64_t>{0, 1, 0, 1}));
  BOOST_CHECK(argmax(x).values == (std::vector<std::int64_t>{5}));
  BOOST_CHECK(argmax(x).shape.empty());
  const Tensor y = Tensor::from_vector({4, 9, 9, 1}, {4}, DType::float32);
  BOOST_CHECK(argmax(y).values == (std::vector<std::int64_t>{1}));
  BOOST_CHECK(argmin(y, 0).values == (std::vector<std::int64_t>{3}));
  check_error([&] { argmax(Tensor::zeros({0, 3})); }, {"argmax", "empty", "[0, 3]"});
  check_error([&] { argmin(x, -3); }, {"argmin", "axis -3"});
}
