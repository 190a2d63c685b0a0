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

// ---- options: Embedding's, LayerNorm over several axes, RMSNorm ----
// (tests/reference/make_nn_options_fixtures.py)

namespace {

const json& option_fixtures() {
  static const json cases = load_cases("nn_options_fixtures.json");
  return cases;
}

// Like check_layer, from the options fixture; float32 cases are compared to 1e-5.
template <class Forward>
void check_option_layer(const std::string& name, nn::Module& layer, Forward forward) {
  const json& c = option_fixtures().at(name);
  const bool single = c.value("dtype", "float64") == "float32";
  const DType dtype = single ? DType::float32 : DType::float64;
  const double rtol = single ? 1e-5 : 1e-6;
  layer.to(dtype);
  nn::StateDict state;
  for (const auto& [param, value] : c.at("params").items()) state[param] = tensor_of(value);
  layer.load_state_dict(state);
  Tensor x;
  const Tensor y = forward(c.at("input"), dtype, x);
  xgrad::test::check_matches(name + " output", y, c.at("output"), rtol);
  y.backward(tensor_of(c.at("grad_output")).to(dtype));
  for (const auto& [param, tensor] : layer.named_parameters())
    xgrad::test::check_matches(name + " grad " + param, tensor.grad(), c.at("grads").at(param), rtol);
  if (c.contains("grad_input")) xgrad::test::check_matches(name + " grad input", x.grad(), c.at("grad_input"), rtol);
  if (c.contains("weight_after"))  // the renorm's in-place change of the table
    xgrad::test::check_matches(name + " weight after", layer.state_dict().at("weight"), c.at("weight_after"), rtol);
}

EmbeddingOptions embedding_options(const json& o) {
  EmbeddingOptions options;
  if (o.contains("padding_idx")) options.padding_idx = o.at("padding_idx").get<std::int64_t>();
  if (o.contains("max_norm")) options.max_norm = o.at("max_norm").get<double>();
  if (o.contains("norm_type"))
    options.norm_type = o.at("norm_type").is_string() ? INFINITY : o.at("norm_type").get<double>();
  options.scale_grad_by_freq = o.value("scale_grad_by_freq", false);
  return options;
}

std::optional<double> eps_of(const json& o) {
  return o.at("eps").is_null() ? std::nullopt : std::optional<double>(o.at("eps").get<double>());
}

template <class Norm>
void check_norm(const std::string& name, Norm& norm) {
  check_option_layer(name, norm, [&](const json& input, DType dtype, Tensor& x) {
    x = tensor_of(input).to(dtype).requires_grad_();
    return norm.forward(x);
  });
}

}  // namespace

BOOST_AUTO_TEST_CASE(embedding_options_match_torch) {
  for (const char* name :
       {"embedding_padding_idx", "embedding_padding_idx_negative", "embedding_max_norm", "embedding_max_norm_l1",
        "embedding_max_norm_l3", "embedding_max_norm_inf", "embedding_scale_grad_by_freq", "embedding_all_options"}) {
    BOOST_TEST_CONTEXT(name) {
      const json& c = option_fixtures().at(name);
      const Shape table = c.at("params").at("weight").at("shape").get<Shape>();
      nn::Embedding embedding(table[0], table[1], embedding_options(c.at("options")));
      check_option_layer(name, embedding,
                         [&](const json& input, DType, Tensor&) { return embedding(indices_of(input)); });
    }
  }
}

BOOST_AUTO_TEST_CASE(layer_norm_over_several_axes_matches_torch) {
  for (const char* name : {"layer_norm_2d", "layer_norm_3d_no_affine", "layer_norm_2d_eps"}) {
    BOOST_TEST_CONTEXT(name) {
      const json& o = option_fixtures().at(name).at("options");
      nn::LayerNorm norm(o.at("normalized_shape").get<Shape>(), o.at("eps").get<double>(),
                         o.at("elementwise_affine").get<bool>());
      check_norm(name, norm);
    }
  }
}

BOOST_AUTO_TEST_CASE(rms_norm_matches_torch) {
  for (const char* name : {"rms_norm", "rms_norm_2d", "rms_norm_no_affine_eps", "rms_norm_float32_default_eps"}) {
    BOOST_TEST_CONTEXT(name) {
      const json& o = option_fixtures().at(name).at("options");
      nn::RMSNorm norm(o.at("normalized_shape").get<Shape>(), eps_of(o), o.at("elementwise_affine").get<bool>());
      check_norm(name, norm);
    }
  }
}
