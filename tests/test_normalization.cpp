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

// ---- over several trailing axes ----

BOOST_AUTO_TEST_CASE(layer_norm_over_several_axes_is_one_row_per_leading_index) {
  const Tensor x = randn64({2, 3, 4, 5}, 11), w = randn64({4, 5}, 12), b = randn64({4, 5}, 13);
  const Tensor mu = mean(x, {-2, -1}, true);
  const Tensor var = mean(pow(x - mu, 2.0), {-2, -1}, true);
  const Tensor expected = (x - mu) / sqrt(var + 1e-5) * w + b;
  check_close(layer_norm(x, {4, 5}, w, b).to_vector(), expected.to_vector(), 1e-10);
  check_close(layer_norm(x, w, b).to_vector(), expected.to_vector(), 1e-10);  // the shape read from weight
  check_close(layer_norm(x, Tensor(), b).to_vector(), ((x - mu) / sqrt(var + 1e-5) + b).to_vector(), 1e-10);
  // The same as the last axis of the flattened rows.
  check_close(layer_norm(x, {3, 4, 5}).to_vector(), layer_norm(reshape(x, {2, 60})).to_vector(), 1e-12);
}

BOOST_AUTO_TEST_CASE(layer_norm_over_several_axes_gradients) {
  const Tensor x = randn64({2, 3, 4}, 14), w = randn64({3, 4}, 15), b = randn64({3, 4}, 16);
  check_gradients([](const Inputs& in) { return layer_norm(in[0], {3, 4}, in[1], in[2]); }, {x, w, b});
  check_gradients([](const Inputs& in) { return layer_norm(in[0], in[1], in[2], 1e-2); }, {x, w, b});
  check_gradients([](const Inputs& in) { return layer_norm(in[0], {2, 3, 4}); }, {x});
  check_gradients([](const Inputs& in) { return layer_norm(in[0], {3, 4}, Tensor(), in[1]); }, {x, b});
}

BOOST_AUTO_TEST_CASE(layer_norm_trailing_shape_errors) {
  const Tensor x = randn64({2, 3, 4}, 17);
  check_error([&] { layer_norm(x, {4, 3}); }, {"layer_norm", "[2, 3, 4]", "does not end in", "[4, 3]"});
  check_error([&] { layer_norm(x, {1, 2, 3, 4}); }, {"layer_norm", "[2, 3, 4]", "[1, 2, 3, 4]"});
  check_error([&] { layer_norm(x, randn64({4, 3}, 18)); }, {"layer_norm", "weight", "[4, 3]", "[2, 3, 4]"});
  check_error([&] { layer_norm(x, Tensor(), randn64({2, 4}, 19)); }, {"layer_norm", "bias", "[2, 4]", "[2, 3, 4]"});
  check_error(
      [&] {
        layer_norm(x, {3, 4}, randn64({4}, 20));
      },
      {"layer_norm", "weight", "[4]", "normalized shape [3, 4]", "[2, 3, 4]"});
  check_error([&] { layer_norm(x, Shape{}); }, {"layer_norm", "normalized_shape", "[2, 3, 4]"});
}

// ---- RMSNorm ----

BOOST_AUTO_TEST_CASE(rms_norm_values_match_the_composed_formula) {
  const Tensor x = randn64({2, 3, 4}, 21), w = randn64({3, 4}, 22), v = randn64({4}, 23);
  const auto reference = [&](const std::vector<int>& axes, double eps) {
    return x / sqrt(mean(x * x, axes, true) + eps);
  };
  check_close(rms_norm(x, {3, 4}, w, 1e-6).to_vector(), (reference({-2, -1}, 1e-6) * w).to_vector(), 1e-10);
  check_close(rms_norm(x, {4}, v, 0.5).to_vector(), (reference({-1}, 0.5) * v).to_vector(), 1e-10);
  check_close(rms_norm(x, {2, 3, 4}).to_vector(), reference({0, 1, 2}, 0x1p-52).to_vector(), 1e-12);
  // No eps: the dtype's machine epsilon, which decides the result for tiny values.
  const Tensor tiny = (randn64({3, 8}, 24, false) * 1e-4).to(DType::float32);
  const Tensor tiny_reference = tiny / sqrt(mean(tiny * tiny, {-1}, true) + 0x1p-23);
  check_close(rms_norm(tiny, {8}).to_vector(), tiny_reference.to_vector(), 1e-6);
  // A zero row stays finite (0 / sqrt(eps)).
  for (double y : rms_norm(Tensor::zeros({2, 4}), {4}).to_vector()) BOOST_CHECK_EQUAL(y, 0.0);
}

BOOST_AUTO_TEST_CASE(rms_norm_gradients) {
  const Tensor x = randn64({2, 3, 4}, 25), w = randn64({3, 4}, 26), v = randn64({4}, 27);
  check_gradients([](const Inputs& in) { return rms_norm(in[0], {3, 4}, in[1]); }, {x, w});
  check_gradients([](const Inputs& in) { return rms_norm(in[0], {4}, in[1], 1e-3); }, {x, v});
  check_gradients([](const Inputs& in) { return rms_norm(in[0], {2, 3, 4}); }, {x});
  check_gradients([](const Inputs& in) { return rms_norm(in[0], {4}, Tensor(), 0.25); }, {x});
}

BOOST_AUTO_TEST_CASE(rms_norm_errors) {
  const Tensor x = randn64({2, 3, 4}, 28);
  check_error([&] { rms_norm(x, {3}); }, {"rms_norm", "[2, 3, 4]", "does not end in", "[3]"});
  check_error([&] { rms_norm(x, {4}, randn64({3}, 29)); }, {"rms_norm", "weight", "[3]", "[4]", "[2, 3, 4]"});
  check_error([&] { rms_norm(x, {4}, Tensor::ones({4})); }, {"rms_norm", "float64", "float32"});
  check_error([&] { rms_norm(x, {4}, Tensor(), 0.0); }, {"rms_norm", "eps"});
  check_error([&] { rms_norm(x, {4}, Tensor(), -1.0); }, {"rms_norm", "eps"});
  check_error([&] { rms_norm(x.to(DType::float32), {4}, Tensor(), 1e-50); }, {"rms_norm", "rounds to 0", "float32"});
  check_error([&] { rms_norm(x, Shape{}); }, {"rms_norm", "normalized_shape"});
}
