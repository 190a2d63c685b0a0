#define BOOST_TEST_MODULE reduce
#include "helpers.hpp"

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
