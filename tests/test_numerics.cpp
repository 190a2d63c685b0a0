#define BOOST_TEST_MODULE numerics
// Numerically hard inputs stay finite in float32: logits up to +-1e4, rows of equal
// values, fully masked rows. And training is bitwise repeatable for a seed.
#include "helpers.hpp"

#include <limits>

#include "xgrad/nn/nn.hpp"
#include "xgrad/optim/optim.hpp"

using namespace xgrad;
using namespace xgrad::test;

namespace {

const double inf = std::numeric_limits<double>::infinity();

// Extreme rows: +-1e4 spread, all equal, and (where masks apply) all masked.
Tensor extreme_logits() {
  return Tensor::from_vector({1e4, -1e4, 0, 5e3,       //
                              -1e4, -1e4, -1e4, -1e4,  //
                              7, 7, 7, 7,              //
                              1e4, 1e4, -1e4, 1e4},
                             {4, 4}, DType::float32, true);
}

void check_finite(const std::string& what, const Tensor& t) {
  for (double v : t.to_vector()) BOOST_CHECK_MESSAGE(std::isfinite(v), what << " holds " << v);
}

// Forward and backward (with a non-uniform seed) are finite.
void check_op(const std::string& what, const std::function<Tensor(const Tensor&)>& f) {
  Tensor x = extreme_logits();
  const Tensor y = f(x);
  check_finite(what + " forward", y);
  Generator gen(1);
  y.backward(Tensor::randn(y.shape(), gen, DType::float32));
  check_finite(what + " gradient", x.grad());
}

}  // namespace

BOOST_AUTO_TEST_CASE(extreme_logits_stay_finite_in_float32) {
  check_op("softmax", [](const Tensor& x) { return softmax(x, -1); });
  check_op("softmax over axis 0", [](const Tensor& x) { return softmax(x, 0); });
  check_op("log_softmax", [](const Tensor& x) { return log_softmax(x, -1); });
  check_op("cross_entropy", [](const Tensor& x) { return cross_entropy(x, Indices({0, 1, 2, 3}, {4})); });
  check_op("layer_norm", [](const Tensor& x) { return layer_norm(x); });
  check_op("layer_norm affine", [](const Tensor& x) {
    return layer_norm(x, Tensor::full({4}, 2.0, DType::float32), Tensor::full({4}, 0.5, DType::float32));
  });
  check_op("attention", [](const Tensor& x) { return scaled_dot_product_attention(x, x, x).output; });
  check_op("attention with a fully masked row", [](const Tensor& x) {
    AttentionOptions o;
    o.mask = Tensor::from_vector({1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1}, {4, 4});
    return scaled_dot_product_attention(x, x, x, o).output;
  });
  check_op("attention with -inf bias", [](const Tensor& x) {
    AttentionOptions o;
    o.additive_mask = Tensor::from_vector({0, 0, 0, 0, -inf, -inf, -inf, -inf, 0, -inf, 0, 0, 0, 0, 0, 0}, {4, 4});
    o.is_causal = true;
    return scaled_dot_product_attention(x, x, x, o).output;
  });
  // softmax of a fully -inf row is zeros, not NaN.
  const Tensor masked = Tensor::full({2, 3}, -inf, DType::float32);
  check_finite("softmax of a masked row", softmax(masked));
}

BOOST_AUTO_TEST_CASE(equal_and_constant_rows) {
  const Tensor equal = Tensor::full({3, 5}, 1e4, DType::float32);
  for (double p : softmax(equal).to_vector()) BOOST_CHECK_CLOSE(p, 0.2, 1e-4);
  for (double v : layer_norm(equal).to_vector()) BOOST_CHECK_EQUAL(v, 0.0);
  BOOST_CHECK_CLOSE(cross_entropy(equal, Indices({0, 1, 2}, {3})).item(), std::log(5.0), 1e-4);
}

BOOST_AUTO_TEST_CASE(training_is_bitwise_repeatable) {
  // Two runs with the same seed (and the machine's thread count) give identical losses.
  const auto run = [] {
    manual_seed(11);
    nn::TransformerEncoderLayerOptions o;
    o.d_model = 16;
    o.nhead = 2;
    o.dim_feedforward = 32;
    o.dropout = 0.1;
    o.norm_first = true;
    nn::Sequential model{std::make_shared<nn::TransformerEncoderLayer>(o), std::make_shared<nn::Linear>(16, 5)};
    optim::AdamW opt(model.named_parameters(), {.lr = 1e-2});
    Generator data(12);
    const Tensor x = Tensor::randn({8, 12, 16}, data);
    std::vector<std::int64_t> labels(8 * 12);
    for (auto& l : labels) l = static_cast<std::int64_t>(data.below(5));
    std::vector<double> losses;
    for (int step = 0; step < 20; ++step) {
      opt.zero_grad();
      Tensor loss = cross_entropy(model(x), Indices(labels, {8, 12}));
      loss.backward();
      opt.step();
      losses.push_back(loss.item());
    }
    return losses;
  };
  const std::vector<double> first = run(), second = run();
  BOOST_CHECK(first == second);
  BOOST_CHECK(first.back() < first.front());
}
