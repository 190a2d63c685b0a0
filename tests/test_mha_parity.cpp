#define BOOST_TEST_MODULE mha_parity
// MultiHeadAttention and TransformerEncoderLayer against PyTorch in float64: weights
// trained in PyTorch load as they are, and outputs, attention weights and the gradients
// of every input and parameter agree to 1e-5 relative. Fixtures come from
// tests/reference/make_attention_fixtures.py (run by hand).
#include "fixtures.hpp"
#include "xgrad/nn/nn.hpp"

using namespace xgrad;
using namespace xgrad::test;

namespace {

constexpr double kTolerance = 1e-5;

const json& fixtures() {
  static const json cases = load_cases("attention_fixtures.json");
  return cases;
}

nn::StateDict state_of(const json& params) {
  nn::StateDict state;
  for (const auto& [name, value] : params.items()) state[name] = tensor_of(value);
  return state;
}

void check_gradients_match(const std::string& name, const nn::Module& module, const json& c) {
  for (const auto& [param, tensor] : module.named_parameters())
    check_matches(name + " grad " + param, tensor.grad(), c.at("grads").at(param), kTolerance);
}

void check_mha_case(const std::string& name, nn::MultiHeadAttentionOptions options) {
  const json& c = fixtures().at(name);
  options.embed_dim = 8;
  options.num_heads = 2;
  nn::MultiHeadAttention mha(options);
  mha.to(DType::float64);
  mha.load_state_dict(state_of(c.at("params")));  // PyTorch's names, as they are

  const json& inputs = c.at("inputs");
  Tensor query = tensor_of(inputs.at("query"), true);
  Tensor key = c.at("self_attention").get<bool>() ? query : tensor_of(inputs.at("key"), true);
  Tensor value = c.at("self_attention").get<bool>() ? query : tensor_of(inputs.at("value"), true);
  nn::AttentionArgs args;
  args.need_weights = true;
  args.is_causal = c.at("causal").get<bool>();
  if (c.contains("key_mask")) args.key_mask = tensor_of(c.at("key_mask"));
  const AttentionOutput out = mha.attend(query, key, value, args);
  check_matches(name + " output", out.output, c.at("output"), kTolerance);
  check_matches(name + " weights", out.weights, c.at("weights"), kTolerance);

  out.output.backward(tensor_of(c.at("grad_output")));
  check_gradients_match(name, mha, c);
  const json& grads = c.at("input_grads");
  check_matches(name + " grad query", query.grad(), grads.at("query"), kTolerance);
  if (!c.at("self_attention").get<bool>()) {
    check_matches(name + " grad key", key.grad(), grads.at("key"), kTolerance);
    check_matches(name + " grad value", value.grad(), grads.at("value"), kTolerance);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(self_attention_matches_torch) { check_mha_case("self", {}); }

BOOST_AUTO_TEST_CASE(cross_attention_matches_torch) { check_mha_case("cross", {}); }

BOOST_AUTO_TEST_CASE(key_mask_matches_torch_key_padding_mask) { check_mha_case("key_mask", {}); }

BOOST_AUTO_TEST_CASE(causal_matches_torch_triangular_mask) { check_mha_case("causal", {}); }

BOOST_AUTO_TEST_CASE(kdim_vdim_matches_torch) {
  nn::MultiHeadAttentionOptions options;
  options.kdim = 6;
  options.vdim = 4;
  check_mha_case("kdim_vdim", options);
}

BOOST_AUTO_TEST_CASE(pre_ln_encoder_layer_matches_torch) {
  const json& c = fixtures().at("encoder_layer");
  nn::TransformerEncoderLayerOptions options;
  options.d_model = 8;
  options.nhead = 2;
  options.dim_feedforward = 16;
  options.dropout = 0.0;
  nn::TransformerEncoderLayer layer(options);
  layer.to(DType::float64);
  layer.load_state_dict(state_of(c.at("params")));
  Tensor src = tensor_of(c.at("inputs").at("src"), true);
  const Tensor out = layer(src);
  check_matches("encoder_layer output", out, c.at("output"), kTolerance);
  out.backward(tensor_of(c.at("grad_output")));
  check_gradients_match("encoder_layer", layer, c);
  check_matches("encoder_layer grad src", src.grad(), c.at("input_grads").at("src"), kTolerance);
}
