#include "xgrad/models/gpt2.hpp"

#include <cmath>

#include "xgrad/autograd/ops.hpp"
#include "xgrad/nn/init.hpp"

namespace xgrad::models {

namespace {

// GPT-2's files keep these projections as Conv1D, [in, out].
bool is_conv1d_weight(const std::string& name) {
  return name.starts_with("transformer.h.") &&
         (name.ends_with(".c_attn.weight") || name.ends_with(".c_proj.weight") || name.ends_with(".c_fc.weight"));
}

Tensor branch_dropout(const Tensor& x, double p, bool training) {
  return p > 0 && training ? dropout(x, p, true, default_generator()) : x;
}

}  // namespace

GPT2Attention::GPT2Attention(const GPT2Config& c) : heads_(c.n_head), attn_pdrop_(c.attn_pdrop) {
  c_attn = register_module("c_attn", std::make_shared<nn::Linear>(c.n_embd, 3 * c.n_embd));
  c_proj = register_module("c_proj", std::make_shared<nn::Linear>(c.n_embd, c.n_embd));
}

Tensor GPT2Attention::forward(const Tensor& x, KVCache::Layer* cache) {
  const std::size_t C = x.shape().back();
  const Tensor qkv = c_attn->forward(x);  // [N, T, 3C]: q, k, v side by side, heads within each
  const double p = is_training() ? attn_pdrop_ : 0.0;
  return c_proj->forward(causal_self_attention({qkv, 0, C}, {qkv, C, C}, {qkv, 2 * C, C}, heads_, heads_, p, cache));
}

GPT2MLP::GPT2MLP(const GPT2Config& c) : activation_(c.activation_function) {
  c_fc = register_module("c_fc", std::make_shared<nn::Linear>(c.n_embd, c.inner()));
  c_proj = register_module("c_proj", std::make_shared<nn::Linear>(c.inner(), c.n_embd));
}

Tensor GPT2MLP::forward(const Tensor& x) {
  const nn::Activation activation = activation_ == "relu"   ? nn::Activation::relu
                                    : activation_ == "gelu" ? nn::Activation::gelu
                                                            : nn::Activation::gelu_tanh;  // gelu_new: the tanh form
  return c_proj->forward(nn::activated(*c_fc, activation, x));
}

GPT2Block::GPT2Block(const GPT2Config& c) : resid_pdrop_(c.resid_pdrop) {
  ln_1 = register_module("ln_1", std::make_shared<nn::LayerNorm>(c.n_embd, c.layer_norm_epsilon));
  attn = register_module("attn", std::make_shared<GPT2Attention>(c));
  ln_2 = register_module("ln_2", std::make_shared<nn::LayerNorm>(c.n_embd, c.layer_norm_epsilon));
  mlp = register_module("mlp", std::make_shared<GPT2MLP>(c));
}

Tensor GPT2Block::forward(const Tensor& x, KVCache::Layer* cache) {
  const Tensor y = x + branch_dropout(attn->forward(ln_1->forward(x), cache), resid_pdrop_, is_training());
  return y + branch_dropout(mlp->forward(ln_2->forward(y)), resid_pdrop_, is_training());
}

GPT2Model::GPT2Model(const GPT2Config& c) : config_(c) {
  wte = register_module("wte", std::make_shared<nn::Embedding>(c.vocab_size, c.n_embd));
  wpe = register_module("wpe", std::make_shared<nn::Embedding>(c.n_positions, c.n_embd));
  h = register_module("h", std::make_shared<nn::Sequential>());
  for (std::size_t i = 0; i < c.n_layer; ++i) h->push_back(std::make_shared<GPT2Block>(c));
  ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(c.n_embd, c.layer_norm_epsilon));
}

GPT2Block& GPT2Model::block(std::size_t i) const { return dynamic_cast<GPT2Block&>((*h)[i]); }

Tensor GPT2Model::forward(const Indices& tokens, KVCache* cache, bool recompute) {
  tokens.check("GPT2");
  const std::size_t cached = cache ? cache->length : 0;
  XGRAD_CHECK(tokens.shape.size() == 2 && tokens.shape[1] > 0 && cached + tokens.shape[1] <= config_.n_positions,
              "GPT2", "tokens ", tokens.shape, " must be [N, T] with 0 < T <= n_positions ", config_.n_positions,
              " - cached positions ", cached);
  if (cache) check_cache("GPT2", *cache, config_.n_layer, tokens.shape[0], config_.n_embd, wte->weight.dtype());
  const std::size_t T = tokens.shape[1];
  std::vector<std::int64_t> positions(T);
  for (std::size_t t = 0; t < T; ++t) positions[t] = static_cast<std::int64_t>(cached + t);
  Tensor x = wte->forward(tokens) + wpe->forward(Indices(positions, {T}));  // [N, T, C] + [T, C]
  x = branch_dropout(x, config_.embd_pdrop, is_training());
  if (cache) cache->layers.resize(config_.n_layer);
  for (std::size_t i = 0; i < config_.n_layer; ++i) {
    GPT2Block& b = block(i);
    x = cache ? b.forward(x, &cache->layers[i]) : recompute ? nn::recompute(b, x) : b.forward(x);
  }
  if (cache) cache->length += T;
  return ln_f->forward(x);
}

GPT2LMHeadModel::GPT2LMHeadModel(const GPT2Config& c) : config_(c) {
  check_config(c, "GPT2LMHeadModel");
  transformer = register_module("transformer", std::make_shared<GPT2Model>(c));
  if (!c.tie_word_embeddings)
    lm_head = register_module("lm_head", std::make_shared<nn::Linear>(c.n_embd, c.vocab_size, /*bias=*/false));
  const double residual_std = c.initializer_range / std::sqrt(2.0 * static_cast<double>(c.n_layer));
  for (auto& [name, p] : named_parameters()) {
    if (name.ends_with("c_proj.weight"))
      nn::init::normal_(p, 0.0, residual_std);
    else if (p.dim() == 2)
      nn::init::normal_(p, 0.0, c.initializer_range);
    else if (name.ends_with("bias"))
      nn::init::zeros_(p);
    else
      nn::init::ones_(p);  // LayerNorm weights
  }
}

Tensor GPT2LMHeadModel::forward(const Indices& tokens, KVCache* cache) {
  const Tensor hidden = transformer->forward(tokens, cache, recompute_);
  if (lm_head) return lm_head->forward(hidden);
  return matmul(hidden, transformer->wte->weight, /*transpose_a=*/false, /*transpose_b=*/true);
}

StateDict GPT2LMHeadModel::hf_state_dict() const {
  StateDict tensors = state_dict();
  for (auto& [name, tensor] : tensors)
    if (is_conv1d_weight(name)) tensor = transpose(tensor.detach(), 0, 1);
  return tensors;
}

std::map<std::string, Shape> GPT2LMHeadModel::hf_shapes() const {
  std::map<std::string, Shape> shapes = PretrainedModel::hf_shapes();
  for (auto& [name, shape] : shapes)
    if (is_conv1d_weight(name)) std::swap(shape[0], shape[1]);
  return shapes;
}

void GPT2LMHeadModel::load_hf_state_dict(StateDict tensors) {
  for (auto& [name, tensor] : tensors)
    if (is_conv1d_weight(name)) tensor = transpose(tensor.detach(), 0, 1);
  load_state_dict(std::move(tensors));
}

bool GPT2LMHeadModel::ignored_on_load(const std::string& name) const {
  // The causal-mask buffers older files carry, and the head when it is tied (a copy of wte).
  return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias") ||
         (config_.tie_word_embeddings && name == "lm_head.weight");
}

}  // namespace xgrad::models
