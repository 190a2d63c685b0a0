#define BOOST_TEST_MODULE nn_parity
// Our layers against PyTorch in float64: outputs and every gradient must agree to 1e-6
// relative. The fixtures come from tests/reference/make_nn_fixtures.py (run by hand).
#include "fixtures.hpp"
#include "xgrad/nn/nn.hpp"

using namespace xgrad;
using namespace xgrad::test;

namespace {

const json& fixtures() {
  static const json cases = load_cases("nn_fixtures.json");
  return cases;
}

void check_matches(const std::string& what, const Tensor& actual, const json& expected) {
  xgrad::test::check_matches(what, actual, expected, 1e-6);
}

// Loads the case's parameters into `layer`, runs forward and backward with PyTorch's
// upstream gradient, and compares output and all gradients.
template <class Forward>
void check_layer(const std::string& name, nn::Module& layer, Forward forward) {
  const json& c = fixtures().at(name);
  layer.to(DType::float64);
  nn::StateDict state;
  for (const auto& [param, value] : c.at("params").items()) state[param] = tensor_of(value);
  layer.load_state_dict(state);
  const Tensor y = forward(c.at("input"));
  check_matches(name + " output", y, c.at("output"));
  y.backward(tensor_of(c.at("grad_output")));
  for (const auto& [param, tensor] : layer.named_parameters())
    check_matches(name + " grad " + param, tensor.grad(), c.at("grads").at(param));
}

template <class Layer>
void check_float_layer(const std::string& name, Layer& layer) {
  Tensor x;
  check_layer(name, layer, [&](const json& input) {
    x = tensor_of(input, true);
    return layer.forward(x);
  });
  check_matches(name + " grad input", x.grad(), fixtures().at(name).at("grad_input"));
}

}  // namespace

BOOST_AUTO_TEST_CASE(linear_matches_torch) {
  nn::Linear with_bias(5, 3), without_bias(5, 3, false);
  check_float_layer("linear", with_bias);
  check_float_layer("linear_no_bias", without_bias);
}

BOOST_AUTO_TEST_CASE(layer_norm_matches_torch) {
  nn::LayerNorm norm(6);
  check_float_layer("layer_norm", norm);
}

BOOST_AUTO_TEST_CASE(embedding_matches_torch) {
  nn::Embedding table(7, 4);
  check_layer("embedding", table, [&](const json& input) { return table.forward(indices_of(input)); });
}

BOOST_AUTO_TEST_CASE(gelu_matches_torch) {
  nn::GELU exact, approximate(true);
  check_float_layer("gelu", exact);
  check_float_layer("gelu_tanh", approximate);
}

BOOST_AUTO_TEST_CASE(log_softmax_matches_torch) {
  nn::LogSoftmax last(-1), first(0);
  check_float_layer("log_softmax", last);
  check_float_layer("log_softmax_axis0", first);
}

BOOST_AUTO_TEST_CASE(cross_entropy_matches_torch) {
  const json& c = fixtures().at("cross_entropy");
  nn::CrossEntropyLoss loss(c.at("ignore_index").get<std::int64_t>());
  Tensor logits = tensor_of(c.at("input"), true);
  Tensor value = loss(logits, indices_of(c.at("targets")));
  check_matches("cross_entropy output", value, c.at("output"));
  value.backward();
  check_matches("cross_entropy grad input", logits.grad(), c.at("grad_input"));
}
