#pragma once
// CausalLM: what training and generation need of a causal language model, whatever its
// family; PretrainedModel adds what Hugging Face's files need. GPT2LMHeadModel and
// LlamaForCausalLM are two (xgrad-train's own character-level GPT is a CausalLM only).
//
//   forward(tokens)          [N, T] token ids -> logits [N, T, vocab], every position
//                            seeing those before it
//   forward(tokens, cache)   the same for tokens that continue the cached ones: each block
//                            appends their keys and values, so generation feeds each new
//                            token once. Gradients flow through a cache as through the
//                            whole forward, so a cache keeps every step's graph alive
//                            unless generation runs under a NoGradGuard, as it should
//
// Parameter names are Hugging Face's ("transformer.h.0.attn.c_attn.weight",
// "model.layers.0.self_attn.q_proj.weight"). hf_state_dict() gives the tensors as that
// family's files lay them out, where that differs from xgrad's (GPT-2's Conv1D weights are
// [in, out]; xgrad's Linear is [out, in]).

#include <map>
#include <memory>
#include <vector>

#include "xgrad/autograd/ops.hpp"
#include "xgrad/models/config.hpp"
#include "xgrad/nn/module.hpp"
#include "xgrad/nn/recompute.hpp"

namespace xgrad::models {

// Every block's keys and values for the positions seen so far.
struct KVCache {
  struct Layer {
    Tensor keys, values;  // [N, length, kv width]; undefined before the first token
  };
  std::vector<Layer> layers;
  std::size_t length = 0;  // positions cached
};

class CausalLM : public nn::Module {
 public:
  virtual Tensor forward(const Indices& tokens, KVCache* cache = nullptr) = 0;
  using nn::Module::forward;

  virtual std::size_t vocab_size() const = 0;
  // The longest context the model takes (GPT-2: its position table; Llama: the
  // max_position_embeddings it was trained to).
  virtual std::size_t max_positions() const = 0;

  // Recomputes each block's forward during backward instead of keeping its activations
  // (the same gradients, less memory).
  void set_recompute(bool on) { recompute_ = on; }
  bool recompute() const { return recompute_; }

 protected:
  bool recompute_ = false;
};

// A model of a published family: a config.json's fields, and Hugging Face's files.
class PretrainedModel : public CausalLM {
 public:
  virtual ModelConfig config() const = 0;

  // The tensors under Hugging Face's names, in its files' layouts (copies where the
  // layout differs, else the parameters themselves).
  virtual StateDict hf_state_dict() const { return state_dict(); }
  // Their shapes, without copying a tensor.
  virtual std::map<std::string, Shape> hf_shapes() const;
  // Loads tensors in that layout; names and shapes were checked against hf_state_dict().
  // (Given by value: tensors whose only handle the caller moved in are taken, not copied.)
  virtual void load_hf_state_dict(StateDict tensors) { load_state_dict(std::move(tensors)); }
  // Names a family's files may hold besides hf_state_dict()'s that loading skips (GPT-2's
  // causal-mask buffers "attn.bias", Llama's "rotary_emb.inv_freq").
  virtual bool ignored_on_load(const std::string& name) const = 0;
  // The prefix of the base model's names ("transformer.", "model."): files saved from the
  // base model alone (GPT2Model) lack it.
  virtual std::string base_prefix() const = 0;
  // The input embedding's name when the head is tied to it, else empty: a file may hold
  // the shared matrix as lm_head.weight alone (safetensors' save_model keeps the first
  // name of shared tensors), which is then the embedding.
  virtual std::string tied_embedding() const = 0;
};

// A model of the config's family, initialized as Hugging Face initializes it (weights
// N(0, initializer_range); GPT-2's projections into the residual stream
// N(0, initializer_range / sqrt(2 n_layer)); biases 0, norms 1), drawn from the
// process-wide generator (xgrad::manual_seed).
std::unique_ptr<PretrainedModel> make_model(const ModelConfig& config);

// Throws, naming `model`, unless `cache` is empty (nothing cached, no layer holding keys)
// or fits this model and tokens: a layer per layer of the model, each holding keys and
// values [batch, length, kv_width] in the model's dtype. A cache is one model's, for one
// batch of prompts: another's would give other logits without a word.
void check_cache(const char* model, const KVCache& cache, std::size_t layers, std::size_t batch, std::size_t kv_width,
                 DType dtype);

// Causal self-attention over q, k and v (column ranges, as multi_head_attention reads
// them; k and v with kv_heads heads). With a cache layer, k and v are appended to it and
// the queries (positions cached length ...) attend to every cached key up to their own.
// A `window` (Mistral's sliding window; 0: none) hides the keys `window` or more
// positions before a query's own.
Tensor causal_self_attention(const Columns& q, const Columns& k, const Columns& v, std::size_t heads,
                             std::size_t kv_heads, double dropout, KVCache::Layer* cache, std::size_t window = 0);

}  // namespace xgrad::models
