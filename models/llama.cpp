#include "xgrad/models/llama.hpp"

#include "xgrad/autograd/ops.hpp"
#include "xgrad/nn/init.hpp"

namespace xgrad::models {

LlamaAttention::LlamaAttention(const LlamaConfig& c) : config_(c), rope_frequencies_(scaled_rope_frequencies(c)) {
  const std::size_t kv_width = c.kv_heads() * c.head_width();
  q_proj = register_module("q_proj", std::make_shared<nn::Linear>(c.hidden_size, c.attention_width(), false));
  k_proj = register_module("k_proj", std::make_shared<nn::Linear>(c.hidden_size, kv_width, false));
  v_proj = register_module("v_proj", std::make_shared<nn::Linear>(c.hidden_size, kv_width, false));
  o_proj = register_module("o_proj", std::make_shared<nn::Linear>(c.attention_width(), c.hidden_size, false));
}

Tensor LlamaAttention::forward(const Tensor& x, KVCache::Layer* cache) {
  // The new rows' positions start after the cached ones.
  const RopeOptions positions{.theta = config_.rope_theta,
                              .offset = cache && cache->keys.defined() ? cache->keys.shape()[1] : 0,
                              .frequencies = rope_frequencies_};
  const Tensor q = rope({q_proj->forward(x)}, config_.num_attention_heads, positions);
  const Tensor k = rope({k_proj->forward(x)}, config_.kv_heads(), positions);
  const double p = is_training() ? config_.attention_dropout : 0.0;
  return o_proj->forward(causal_self_attention({q}, {k}, {v_proj->forward(x)}, config_.num_attention_heads,
                                               config_.kv_heads(), p, cache, config_.sliding_window));
}

LlamaMLP::LlamaMLP(const LlamaConfig& c) {
  gate_proj = register_module("gate_proj", std::make_shared<nn::Linear>(c.hidden_size, c.intermediate_size, false));
  up_proj = register_module("up_proj", std::make_shared<nn::Linear>(c.hidden_size, c.intermediate_size, false));
  down_proj = register_module("down_proj", std::make_shared<nn::Linear>(c.intermediate_size, c.hidden_size, false));
}

Tensor LlamaMLP::forward(const Tensor& x) {
  return down_proj->forward(swiglu(gate_proj->forward(x), up_proj->forward(x)));
}

LlamaDecoderLayer::LlamaDecoderLayer(const LlamaConfig& c) {
  input_layernorm = register_module("input_layernorm", std::make_shared<nn::RMSNorm>(c.hidden_size, c.rms_norm_eps));
  self_attn = register_module("self_attn", std::make_shared<LlamaAttention>(c));
  post_attention_layernorm =
      register_module("post_attention_layernorm", std::make_shared<nn::RMSNorm>(c.hidden_size, c.rms_norm_eps));
  mlp = register_module("mlp", std::make_shared<LlamaMLP>(c));
}

Tensor LlamaDecoderLayer::forward(const Tensor& x, KVCache::Layer* cache) {
  const Tensor y = x + self_attn->forward(input_layernorm->forward(x), cache);
  return y + mlp->forward(post_attention_layernorm->forward(y));
}

LlamaModel::LlamaModel(const LlamaConfig& c) : config_(c) {
  embed_tokens = register_module("embed_tokens", std::make_shared<nn::Embedding>(c.vocab_size, c.hidden_size));
  layers = register_module("layers", std::make_shared<nn::Sequential>());
  for (std::size_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(std::make_shared<LlamaDecoderLayer>(c));
  norm = register_module("norm", std::make_shared<nn::RMSNorm>(c.hidden_size, c.rms_norm_eps));
}

LlamaDecoderLayer& LlamaModel::layer(std::size_t i) const { return dynamic_cast<LlamaDecoderLayer&>((*layers)[i]); }

Tensor LlamaModel::forward(const Indices& tokens, KVCache* cache, bool recompute) {
  tokens.check("Llama");
  const std::size_t cached = cache ? cache->length : 0;
  XGRAD_CHECK(
      tokens.shape.size() == 2 && tokens.shape[1] > 0 && cached + tokens.shape[1] <= config_.max_position_embeddings,
      "Llama", "tokens ", tokens.shape, " must be [N, T] with 0 < T <= max_position_embeddings ",
      config_.max_position_embeddings, " - cached positions ", cached);
  if (cache)
    check_cache("Llama", *cache, config_.num_hidden_layers, tokens.shape[0], config_.kv_heads() * config_.head_width(),
                embed_tokens->weight.dtype());
  Tensor x = embed_tokens->forward(tokens);
  if (cache) cache->layers.resize(config_.num_hidden_layers);
  for (std::size_t i = 0; i < config_.num_hidden_layers; ++i) {
    LlamaDecoderLayer& l = layer(i);
    x = cache ? l.forward(x, &cache->layers[i]) : recompute ? nn::recompute(l, x) : l.forward(x);
  }
  if (cache) cache->length += tokens.shape[1];
  return norm->forward(x);
}

LlamaForCausalLM::LlamaForCausalLM(const LlamaConfig& c) : config_(c) {
  check_config(c, "LlamaForCausalLM");
  model = register_module("model", std::make_shared<LlamaModel>(c));
  if (!c.tie_word_embeddings)
    lm_head = register_module("lm_head", std::make_shared<nn::Linear>(c.hidden_size, c.vocab_size, false));
  for (auto& [name, p] : named_parameters()) {
    if (p.dim() == 2)
      nn::init::normal_(p, 0.0, c.initializer_range);
    else
      nn::init::ones_(p);  // RMSNorm weights
  }
}

Tensor LlamaForCausalLM::forward(const Indices& tokens, KVCache* cache) {
  const Tensor hidden = model->forward(tokens, cache, recompute_);
  if (lm_head) return lm_head->forward(hidden);
  return matmul(hidden, model->embed_tokens->weight, /*transpose_a=*/false, /*transpose_b=*/true);
}

bool LlamaForCausalLM::ignored_on_load(const std::string& name) const {
  return name.ends_with(".rotary_emb.inv_freq") || (config_.tie_word_embeddings && name == "lm_head.weight");
}

}  // namespace xgrad::models
