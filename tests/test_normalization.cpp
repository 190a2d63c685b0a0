#define BOOST_TEST_MODULE normalization
#include "helpers.hpp"

using namespace xgrad;
using namespace xgrad::test;

using Inputs = std::vector<Tensor>;

BOOST_AUTO_TEST_CASE(layer_norm_values_match_the_composed_formula) {
  const Tensor x = randn64({2, 3, 6}, 1), w = randn64({6}, 2), b = randn64({6}, 3);
  const Tensor mu = mean(x, {-1}, true);
  const Tensor var = mean(pow(x - mu, 2.0), {-1}, true);
  const Tensor expected = (x - mu) / sqrt(var + 1e-5) * w + b;
  check_close(layer_norm(x, w, b).to_vector(), expected.to_vector(), 1e-10);
  const auto plain = layer_norm(x).to_vector();  // no affine part: zero mean per row
  double row_sum = 0;
  for (int j = 0; j < 6; ++j) row_sum += plain[j];
  BOOST_CHECK_SMALL(row_sum, 1e-10);
}

BOOST_AUTO_TEST_CASE(layer_norm_gradients) {
  const Tensor x = randn64({2, 3, 6}, 4), w = randn64({6}, 5), b = randn64({6}, 6);
  check_gradients([](const Inputs& in) { return layer_norm(in[0], in[1], in[2]); }, {x, w, b});
  check_gradients([](const Inputs& in) { return layer_norm(in[0]); }, {x});
  check_gradients([](const Inputs& in) { return layer_norm(in[0], in[1], Tensor(), 1e-3); }, {x, w});
}

BOOST_AUTO_TEST_CASE(layer_norm_of_a_constant_row_is_finite) {
  const Tensor x = Tensor::full({2, 4}, 1e4, DType::float32);
  for (double v : layer_norm(x).to_vector()) BOOST_CHECK_EQUAL(v, 0.0);
}

BOOST_AUTO_TEST_CASE(layer_norm_errors) {
  const Tensor x = randn64({2, 6}, 7);
  check_error([&] { layer_norm(x, randn64({5}, 8)); }, {"layer_norm", "weight", "[5]", "[2, 6]"});
  check_error([&] { layer_norm(x, Tensor(), Tensor(), 0.0); }, {"layer_norm", "eps"});
}
