#pragma once
// GPT-2 (Radford et al. 2019) as Hugging Face's GPT2LMHeadModel names it:
//
//   transformer.wte, transformer.wpe     token and learned position embeddings
//   transformer.h.<i>                    pre-LN blocks:
//     x = x + attn.c_proj(causal_attention(attn.c_attn(ln_1(x))))   c_attn: q | k | v
//     x = x + mlp.c_proj(gelu_new(mlp.c_fc(ln_2(x))))
//   transformer.ln_f                     the final LayerNorm
//   lm_head                              the output head: wte's weight when tied (the
//                                        default), else a Linear of its own
//
// Dropout as GPT-2 places it (embd_pdrop after the embeddings, attn_pdrop on the attention
// weights, resid_pdrop on each branch before it joins the residual stream), in training.
// The projections are xgrad Linears ([out, in]); GPT-2's files hold them as Conv1D
// ([in, out]), which hf_state_dict() and load_hf_state_dict() turn.

#include "xgrad/models/causal_lm.hpp"
#include "xgrad/nn/embedding.hpp"
#include "xgrad/nn/linear.hpp"
#include "xgrad/nn/normalization.hpp"
#include "xgrad/nn/sequential.hpp"

namespace xgrad::models {

class GPT2Attention : public nn::Module {
 public:
  explicit GPT2Attention(const GPT2Config& config);
  using nn::Module::forward;  // a Tensor alone is no input: it throws, naming the module
  Tensor forward(const Tensor& x, KVCache::Layer* cache);
  std::string type_name() const override { return "GPT2Attention"; }

  std::shared_ptr<nn::Linear> c_attn, c_proj;

 private:
  std::size_t heads_;
  double attn_pdrop_;
};

class GPT2MLP : public nn::Module {
 public:
  explicit GPT2MLP(const GPT2Config& config);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GPT2MLP"; }

  std::shared_ptr<nn::Linear> c_fc, c_proj;

 private:
  std::string activation_;
};

class GPT2Block : public nn::Module {
 public:
  explicit GPT2Block(const GPT2Config& config);
  Tensor forward(const Tensor& x) override { return forward(x, nullptr); }
  Tensor forward(const Tensor& x, KVCache::Layer* cache);
  std::string type_name() const override { return "GPT2Block"; }

  std::shared_ptr<nn::LayerNorm> ln_1, ln_2;
  std::shared_ptr<GPT2Attention> attn;
  std::shared_ptr<GPT2MLP> mlp;

 private:
  double resid_pdrop_;
};

// The stack without the head: hidden states [N, T, n_embd] after ln_f.
class GPT2Model : public nn::Module {
 public:
  explicit GPT2Model(const GPT2Config& config);
  using nn::Module::forward;  // a Tensor alone is no input: it throws, naming the module
  Tensor forward(const Indices& tokens, KVCache* cache, bool recompute);
  std::string type_name() const override { return "GPT2Model"; }
  GPT2Block& block(std::size_t i) const;

  std::shared_ptr<nn::Embedding> wte, wpe;
  std::shared_ptr<nn::Sequential> h;
  std::shared_ptr<nn::LayerNorm> ln_f;

 private:
  GPT2Config config_;
};

class GPT2LMHeadModel : public PretrainedModel {
 public:
  explicit GPT2LMHeadModel(const GPT2Config& config);
  using CausalLM::forward;  // a Tensor alone is no input: it throws, naming the module
  Tensor forward(const Indices& tokens, KVCache* cache = nullptr) override;
  std::string type_name() const override { return "GPT2LMHeadModel"; }

  ModelConfig config() const override { return config_; }
  std::size_t vocab_size() const override { return config_.vocab_size; }
  std::size_t max_positions() const override { return config_.n_positions; }
  StateDict hf_state_dict() const override;
  std::map<std::string, Shape> hf_shapes() const override;
  void load_hf_state_dict(StateDict tensors) override;
  bool ignored_on_load(const std::string& name) const override;
  std::string base_prefix() const override { return "transformer."; }
  std::string tied_embedding() const override { return config_.tie_word_embeddings ? "transformer.wte.weight" : ""; }

  std::shared_ptr<GPT2Model> transformer;
  std::shared_ptr<nn::Linear> lm_head;  // null when tied to transformer.wte

 private:
  GPT2Config config_;
};

}  // namespace xgrad::models
