#pragma once
// A character-level GPT in GPT-2's layout (nanoGPT's), for `xgrad-train --task lm`:
// token and learned position embeddings; pre-LN blocks
//   x = x + c_proj(causal_attention(ln_1(x)))       one fused Linear(C, 3C) for q, k, v
//   x = x + mlp_proj(GELU(c_fc(ln_2(x))))           exact GELU, width 4C
// a final LayerNorm, and an output head that is the token embedding's weight (tied).
// Init: every Linear and Embedding weight N(0, 0.02), the two projections back into the
// residual stream N(0, 0.02 / sqrt(2 layers)), biases 0. Parameter names follow
// nanoGPT's ("h.0.c_attn.weight").

#include <memory>

#include "xgrad/autograd/random.hpp"
#include "xgrad/nn/nn.hpp"
#include "xgrad/optim/optimizer.hpp"

namespace train {

struct GPTOptions {
  std::size_t vocab = 65, block = 64, layers = 4, heads = 4, d_model = 128;
};

class GPTBlock : public xgrad::nn::Module {
 public:
  GPTBlock(std::size_t d_model, std::size_t heads);
  xgrad::Tensor forward(const xgrad::Tensor& x) override;  // [N, T, C] -> [N, T, C], causal

  std::size_t heads;
  std::shared_ptr<xgrad::nn::LayerNorm> ln_1, ln_2;
  std::shared_ptr<xgrad::nn::Linear> c_attn, c_proj, c_fc, mlp_proj;
};

class GPT : public xgrad::nn::Module {
 public:
  explicit GPT(const GPTOptions& options);
  xgrad::Tensor forward(const xgrad::Indices& tokens);  // [N, T] (T <= block) -> logits [N, T, vocab]

  GPTOptions options;
  std::shared_ptr<xgrad::nn::Embedding> wte, wpe;
  std::shared_ptr<xgrad::nn::Sequential> h;
  std::shared_ptr<xgrad::nn::LayerNorm> ln_f;
};

// Continues `context` (token ids, not empty) by `count` tokens, each drawn from the
// model's distribution at the last position: logits / temperature, only the top_k most
// likely (0: all); temperature 0 takes the most likely (greedy). When the context is
// longer than the model's block, the window slides. A function of (model, context, gen).
struct SampleOptions {
  double temperature = 1.0;
  std::size_t top_k = 0;
};
std::vector<std::int64_t> generate(GPT& model, std::vector<std::int64_t> context, std::size_t count,
                                   const SampleOptions& options, xgrad::Generator& gen);

// nanoGPT's optimizer groups: weight decay on every 2-D parameter (embeddings and Linear
// weights), none on biases and LayerNorm.
std::vector<xgrad::optim::ParamGroup> decay_groups(const xgrad::nn::Module& model, double weight_decay);

}  // namespace train
