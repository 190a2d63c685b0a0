#pragma once
// Llama (Touvron et al. 2023) as Hugging Face's LlamaForCausalLM names it:
//
//   model.embed_tokens                   the token embedding (no position table: RoPE)
//   model.layers.<i>                     pre-norm blocks:
//     q, k, v = self_attn.{q,k,v}_proj(input_layernorm(x))      k, v: num_key_value_heads
//     x = x + self_attn.o_proj(causal_attention(rope(q), rope(k), v))
//     x = x + mlp.down_proj(silu(mlp.gate_proj(h)) * mlp.up_proj(h)),
//         h = post_attention_layernorm(x)                            (SwiGLU)
//   model.norm                           the final RMSNorm
//   lm_head                              the output head (embed_tokens' weight when tied)
//
// RoPE in Hugging Face's rotate-half form (autograd/ops.hpp rope()); grouped-query
// attention reads each K/V head in place for its group of query heads. No biases.
// The file layout is xgrad's own (nn.Linear is [out, in] on both sides).

#include "xgrad/models/causal_lm.hpp"
#include "xgrad/nn/embedding.hpp"
#include "xgrad/nn/linear.hpp"
#include "xgrad/nn/normalization.hpp"
#include "xgrad/nn/sequential.hpp"

namespace xgrad::models {

class LlamaAttention : public nn::Module {
 public:
  explicit LlamaAttention(const LlamaConfig& config);
  using nn::Module::forward;  // a Tensor alone is no input: it throws, naming the module
  Tensor forward(const Tensor& x, KVCache::Layer* cache);
  std::string type_name() const override { return "LlamaAttention"; }

  std::shared_ptr<nn::Linear> q_proj, k_proj, v_proj, o_proj;

 private:
  LlamaConfig config_;
  std::vector<double> rope_frequencies_;  // rope_scaling applied (config.hpp)
};

class LlamaMLP : public nn::Module {
 public:
  explicit LlamaMLP(const LlamaConfig& config);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LlamaMLP"; }

  std::shared_ptr<nn::Linear> gate_proj, up_proj, down_proj;
};

class LlamaDecoderLayer : public nn::Module {
 public:
  explicit LlamaDecoderLayer(const LlamaConfig& config);
  Tensor forward(const Tensor& x) override { return forward(x, nullptr); }
  Tensor forward(const Tensor& x, KVCache::Layer* cache);
  std::string type_name() const override { return "LlamaDecoderLayer"; }

  std::shared_ptr<nn::RMSNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<LlamaAttention> self_attn;
  std::shared_ptr<LlamaMLP> mlp;
};

// The stack without the head: hidden states [N, T, hidden_size] after the final norm.
class LlamaModel : public nn::Module {
 public:
  explicit LlamaModel(const LlamaConfig& config);
  using nn::Module::forward;  // a Tensor alone is no input: it throws, naming the module
  Tensor forward(const Indices& tokens, KVCache* cache, bool recompute);
  std::string type_name() const override { return "LlamaModel"; }
  LlamaDecoderLayer& layer(std::size_t i) const;

  std::shared_ptr<nn::Embedding> embed_tokens;
  std::shared_ptr<nn::Sequential> layers;
  std::shared_ptr<nn::RMSNorm> norm;

 private:
  LlamaConfig config_;
};

class LlamaForCausalLM : public PretrainedModel {
 public:
  explicit LlamaForCausalLM(const LlamaConfig& config);
  using CausalLM::forward;  // a Tensor alone is no input: it throws, naming the module
  Tensor forward(const Indices& tokens, KVCache* cache = nullptr) override;
  std::string type_name() const override { return "LlamaForCausalLM"; }

  ModelConfig config() const override { return config_; }
  std::size_t vocab_size() const override { return config_.vocab_size; }
  std::size_t max_positions() const override { return config_.max_position_embeddings; }
  bool ignored_on_load(const std::string& name) const override;
  std::string base_prefix() const override { return "model."; }
  std::string tied_embedding() const override { return config_.tie_word_embeddings ? "model.embed_tokens.weight" : ""; }

  std::shared_ptr<LlamaModel> model;
  std::shared_ptr<nn::Linear> lm_head;  // null when tied to model.embed_tokens

 private:
  LlamaConfig config_;
};

}  // namespace xgrad::models
