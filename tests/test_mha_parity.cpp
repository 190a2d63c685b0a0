#define BOOST_TEST_MODULE mha_parity
// MultiHeadAttention and the transformer layers and stacks against PyTorch in float64: weights
// trained in PyTorch load as they are, and outputs, attention weights and the gradients
// of every input and parameter agree to 1e-12 relative. Fixtures come from
// tests/reference/make_attention_fixtures.py (run by hand).
#include <map>
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

namespace {

nn::AttentionArgs args_of(const json& masks, const char* block) {
  nn::AttentionArgs args;
  if (!masks.contains(block)) return args;
  const json& m = masks.at(block);
  const auto mask = [&](const char* form) { return m.contains(form) ? tensor_of(m.at(form)) : Tensor(); };
  args.key_padding_mask = mask("key_padding_mask");
  args.attn_mask = mask("attn_mask");
  args.attn_bias = mask("attn_bias");
  args.is_causal = m.contains("is_causal");
  return args;
}

nn::TransformerLayerOptions layer_options_of(const json& o) {
  nn::TransformerLayerOptions options;
  options.d_model = o.at("d_model");
  options.nhead = o.at("nhead");
  options.dim_feedforward = o.at("dim_feedforward");
  options.dropout = o.at("dropout");
  options.batch_first = o.at("batch_first");
  options.norm_first = o.at("norm_first");
  options.activation = o.at("activation") == "gelu" ? nn::Activation::gelu : nn::Activation::relu;
  return options;
}

// Loads PyTorch's parameters into `module`, runs `call` on the case's inputs, and compares
// the output and every gradient.
template <class Call>
void check_layer_case(const std::string& name, nn::Module& module, Call call) {
  BOOST_TEST_CONTEXT(name) {
    const json& c = fixtures().at(name);
    module.to(DType::float64);
    module.load_state_dict(state_of(c.at("params")));  // strict: every PyTorch name, nothing else
    std::map<std::string, Tensor> inputs;
    for (const auto& [input, value] : c.at("inputs").items()) inputs[input] = tensor_of(value, true);
    const Tensor out = call(inputs, c.at("masks"));
    check_matches(name + " output", out, c.at("output"), kTolerance);
    out.backward(tensor_of(c.at("grad_output")));
    check_gradients_match(name, module, c);
    for (const auto& [input, tensor] : inputs)
      check_matches(name + " grad " + input, tensor.grad(), c.at("input_grads").at(input), kTolerance);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(encoder_layers_match_torch) {
  for (const char* name : {"encoder_layer_pre_ln", "encoder_layer_post_ln", "encoder_layer_post_ln_gelu_seq_first"}) {
    nn::TransformerEncoderLayer layer(layer_options_of(fixtures().at(name).at("options")));
    check_layer_case(name, layer,
                     [&](auto& in, const json& masks) { return layer.forward(in.at("src"), args_of(masks, "src")); });
  }
}

BOOST_AUTO_TEST_CASE(decoder_layers_match_torch) {
  for (const char* name : {"decoder_layer_post_ln", "decoder_layer_pre_ln_gelu", "decoder_layer_seq_first"}) {
    nn::TransformerDecoderLayer layer(layer_options_of(fixtures().at(name).at("options")));
    check_layer_case(name, layer, [&](auto& in, const json& masks) {
      return layer.forward(in.at("tgt"), in.at("memory"), args_of(masks, "tgt"), args_of(masks, "memory"));
    });
  }
}

BOOST_AUTO_TEST_CASE(stacks_match_torch) {
  for (const char* ln : {"pre", "post"}) {
    const std::string encoder_name = str("encoder_stack_", ln, "_ln"), decoder_name = str("decoder_stack_", ln, "_ln");
    const json& eo = fixtures().at(encoder_name).at("options");
    nn::TransformerEncoder encoder(layer_options_of(eo), eo.at("num_layers"), eo.at("norm"));
    check_layer_case(encoder_name, encoder,
                     [&](auto& in, const json& masks) { return encoder.forward(in.at("src"), args_of(masks, "src")); });
    const json& dopt = fixtures().at(decoder_name).at("options");
    nn::TransformerDecoder decoder(layer_options_of(dopt), dopt.at("num_layers"), dopt.at("norm"));
    check_layer_case(decoder_name, decoder, [&](auto& in, const json& masks) {
      return decoder.forward(in.at("tgt"), in.at("memory"), args_of(masks, "tgt"), args_of(masks, "memory"));
    });
  }
}

BOOST_AUTO_TEST_CASE(transformer_matches_torch) {
  for (const char* name : {"transformer_post_ln", "transformer_pre_ln"}) {
    const json& o = fixtures().at(name).at("options");
    nn::TransformerOptions options;
    static_cast<nn::TransformerLayerOptions&>(options) = layer_options_of(o);  // every layer's
    options.num_encoder_layers = o.at("num_encoder_layers");
    options.num_decoder_layers = o.at("num_decoder_layers");
    nn::Transformer model(options);
    check_layer_case(name, model, [&](auto& in, const json& masks) {
      return model.forward(in.at("src"), in.at("tgt"), args_of(masks, "src"), args_of(masks, "tgt"),
                           args_of(masks, "memory"));
    });
  }
}
