#pragma once
// A character-level GPT in GPT-2's layout (nanoGPT's), for `xgrad-train --task lm`:
// token and learned position embeddings; pre-LN blocks
//   x = x + c_proj(causal_attention(ln_1(x)))       one fused Linear(C, 3C) for q, k, v
//   x = x + mlp_proj(GELU(c_fc(ln_2(x))))           exact GELU, width 4C
// a final LayerNorm, and an output head that is the token embedding's weight (tied).
// Init: every Linear and Embedding weight N(0, 0.02), the two projections back into the
// residual stream N(0, 0.02 / sqrt(2 layers)), biases 0. Parameter names follow
// nanoGPT's ("h.0.c_attn.weight").

#include <functional>
#include <memory>

#include "xgrad/autograd/random.hpp"
#include "xgrad/models/causal_lm.hpp"
#include "xgrad/nn/nn.hpp"
#include "xgrad/optim/optimizer.hpp"

namespace tools {

struct GPTOptions {
  std::size_t vocab = 65, block = 64, layers = 4, heads = 4, d_model = 128;
};

class GPTBlock : public xgrad::nn::Module {
 public:
  GPTBlock(std::size_t d_model, std::size_t heads);
  xgrad::Tensor forward(const xgrad::Tensor& x) override;  // [N, T, C] -> [N, T, C], causal
  // With the earlier positions' keys and values cached: x holds the next positions, whose
  // keys and values are appended. nullptr: no cache.
  xgrad::Tensor forward(const xgrad::Tensor& x, xgrad::models::KVCache::Layer* cache);

  std::size_t heads;
  bool keep_attention = false;  // keep each forward's map [N, heads, T, T] in last_attention
  xgrad::Tensor last_attention;
  std::shared_ptr<xgrad::nn::LayerNorm> ln_1, ln_2;
  std::shared_ptr<xgrad::nn::Linear> c_attn, c_proj, c_fc, mlp_proj;
};

// A causal language model (models/causal_lm.hpp): [N, T] (T <= block) -> logits
// [N, T, vocab]; with a cache, the tokens continue the cached ones.
class GPT : public xgrad::models::CausalLM {
 public:
  explicit GPT(const GPTOptions& options);
  xgrad::Tensor forward(const xgrad::Indices& tokens, xgrad::models::KVCache* cache = nullptr) override;
  std::size_t vocab_size() const override { return options.vocab; }
  std::size_t max_positions() const override { return options.block; }
  GPTBlock& block(std::size_t i) const;

  GPTOptions options;
  std::shared_ptr<xgrad::nn::Embedding> wte, wpe;
  std::shared_ptr<xgrad::nn::Sequential> h;
  std::shared_ptr<xgrad::nn::LayerNorm> ln_f;
};

// Continues `context` (token ids, not empty) by `count` tokens, each drawn from the
// model's distribution at the last position: logits / temperature, only the top_k most
// likely (0: all); temperature 0 takes the most likely (greedy). A function of (model,
// context, gen). The model sees a window of the context: all of it while it fits the
// block; then the window slides by half a block at a time (window_start), so that
// the cache is rebuilt once per half block instead of at every token. With use_cache
// false every token recomputes its whole window: the same text, slowly. Only ids below
// `vocabulary` are drawn (the tokens a model's data has, where its vocab_size is larger:
// a padded vocabulary, or a config's; 0: every id of the model).
struct SampleOptions {
  double temperature = 1.0;
  std::size_t top_k = 0;
  bool use_cache = true;
  std::size_t vocabulary = 0;
};
std::size_t window_start(std::size_t context_length, std::size_t block);
// `each`, when given, sees every new token as it is drawn.
std::vector<std::int64_t> generate(xgrad::models::CausalLM& model, std::vector<std::int64_t> context, std::size_t count,
                                   const SampleOptions& options, xgrad::Generator& gen,
                                   const std::function<void(std::int64_t)>& each = {});

// nanoGPT's optimizer groups: weight decay on every 2-D parameter (embeddings and Linear
// weights), none on biases and LayerNorm.
std::vector<xgrad::optim::ParamGroup> decay_groups(const xgrad::nn::Module& model, double weight_decay);

}  // namespace tools
