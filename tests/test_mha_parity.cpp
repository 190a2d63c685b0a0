#define BOOST_TEST_MODULE mha_parity
// MultiHeadAttention and TransformerEncoderLayer against PyTorch in float64: weights
// trained in PyTorch load as they are, and outputs, attention weights and the gradients
// of every input and parameter agree to 1e-12 relative. Fixtures come from
// tests/reference/make_attention_fixtures.py (run by hand).
#include "fixtures.hpp"
#include "xgrad/nn/nn.hpp"

using namespace xgrad;
using namespace xgrad::test;

namespace {

constexpr double kTolerance = 1e-12;

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

void check_mha_case(const std::string& name) {
  BOOST_TEST_CONTEXT(name) {
    const json& c = fixtures().at(name);
    const json& o = c.at("options");
    nn::MultiHeadAttentionOptions options;
    options.embed_dim = 8;
    options.num_heads = 2;
    options.kdim = o.at("kdim");
    options.vdim = o.at("vdim");
    options.batch_first = o.at("batch_first");
    options.add_bias_kv = o.at("add_bias_kv");
    options.add_zero_attn = o.at("add_zero_attn");
    nn::MultiHeadAttention mha(options);
    mha.to(DType::float64);
    mha.load_state_dict(state_of(c.at("params")));  // PyTorch's names, as they are

    const json& inputs = c.at("inputs");
    Tensor query = tensor_of(inputs.at("query"), true);
    Tensor key = c.at("self_attention").get<bool>() ? query : tensor_of(inputs.at("key"), true);
    Tensor value = c.at("self_attention").get<bool>() ? query : tensor_of(inputs.at("value"), true);
    // PyTorch's masks under PyTorch's names, as they are (bool ones as 0/1).
    nn::AttentionArgs args;
    args.need_weights = true;
    args.average_weights = c.at("average_weights");
    args.is_causal = c.at("causal").get<bool>();
    const json& masks = c.at("masks");
    const auto mask = [&](const char* form) { return masks.contains(form) ? tensor_of(masks.at(form)) : Tensor(); };
    args.key_padding_mask = mask("key_padding_mask");
    args.key_padding_bias = mask("key_padding_bias");
    args.attn_mask = mask("attn_mask");
    args.attn_bias = mask("attn_bias");
    const AttentionOutput out = mha.attend(query, key, value, args);
    check_matches(name + " output", out.output, c.at("output"), kTolerance);
    check_matches(name + " weights", out.weights, c.at("weights"), kTolerance);

    // A loss through the output and the weights, as the fixture's.
    (sum(out.output * tensor_of(c.at("grad_output"))) + sum(out.weights * tensor_of(c.at("grad_weights")))).backward();
    check_gradients_match(name, mha, c);
    const json& grads = c.at("input_grads");
    check_matches(name + " grad query", query.grad(), grads.at("query"), kTolerance);
    if (!c.at("self_attention").get<bool>()) {
      check_matches(name + " grad key", key.grad(), grads.at("key"), kTolerance);
      check_matches(name + " grad value", value.grad(), grads.at("value"), kTolerance);
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(multi_head_attention_matches_torch) {
  for (const char* name : {"self", "cross", "key_padding_mask", "causal", "kdim_vdim", "attn_mask_3d",
                           "float_attn_mask", "float_key_padding_mask", "seq_first", "bias_kv", "zero_attn",
                           "bias_kv_zero_attn_masks", "bias_kv_kdim_seq_first"})
    check_mha_case(name);
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
