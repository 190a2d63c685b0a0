#include "gpt.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "xgrad/autograd/ops.hpp"

namespace tools {

using namespace xgrad;

GPTBlock::GPTBlock(std::size_t d_model, std::size_t heads) : heads(heads) {
  ln_1 = register_module("ln_1", std::make_shared<nn::LayerNorm>(d_model));
  c_attn = register_module("c_attn", std::make_shared<nn::Linear>(d_model, 3 * d_model));
  c_proj = register_module("c_proj", std::make_shared<nn::Linear>(d_model, d_model));
  ln_2 = register_module("ln_2", std::make_shared<nn::LayerNorm>(d_model));
  c_fc = register_module("c_fc", std::make_shared<nn::Linear>(d_model, 4 * d_model));
  mlp_proj = register_module("mlp_proj", std::make_shared<nn::Linear>(4 * d_model, d_model));
}

Tensor GPTBlock::forward(const Tensor& x) { return forward(x, nullptr); }

Tensor GPTBlock::forward(const Tensor& x, models::KVCache::Layer* cache) {
  const std::size_t C = x.shape().back();
  const Tensor qkv = c_attn->forward(ln_1->forward(x));  // [N, T, 3C]: q, k, v side by side
  Tensor attended;
  if (keep_attention) {  // the map kept for drawing: the whole sequence at once, no cache
    XGRAD_CHECK(!cache, "GPTBlock", "keep_attention draws the whole sequence at once: no key/value cache");
    AttentionOptions options;
    options.need_weights = true;
    options.is_causal = true;
    const AttentionOutput out = multi_head_attention({qkv, 0, C}, {qkv, C, C}, {qkv, 2 * C, C}, heads, true, options);
    last_attention = out.weights;
    attended = out.output;
  } else {
    attended = models::causal_self_attention({qkv, 0, C}, {qkv, C, C}, {qkv, 2 * C, C}, heads, heads, 0.0, cache);
  }
  const Tensor y = x + c_proj->forward(attended);
  return y + mlp_proj->forward(nn::activated(*c_fc, nn::Activation::gelu, ln_2->forward(y)));
}

GPT::GPT(const GPTOptions& o) : options(o) {
  XGRAD_CHECK(o.heads > 0 && o.d_model % o.heads == 0, "GPT", "heads ", o.heads, " must divide d_model ", o.d_model);
  wte = register_module("wte", std::make_shared<nn::Embedding>(o.vocab, o.d_model));
  wpe = register_module("wpe", std::make_shared<nn::Embedding>(o.block, o.d_model));
  h = register_module("h", std::make_shared<nn::Sequential>());
  for (std::size_t i = 0; i < o.layers; ++i) h->push_back(std::make_shared<GPTBlock>(o.d_model, o.heads));
  ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(o.d_model));
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(o.layers));
  for (auto& [name, p] : named_parameters()) {
    const bool residual = name.ends_with("c_proj.weight") || name.ends_with("mlp_proj.weight");
    if (residual)
      nn::init::normal_(p, 0.0, residual_std);
    else if (p.dim() == 2)
      nn::init::normal_(p, 0.0, 0.02);
    else if (name.ends_with("bias"))
      nn::init::zeros_(p);
  }
}

Tensor GPT::forward(const Indices& tokens, models::KVCache* cache) {
  tokens.check("GPT");
  const std::size_t cached = cache ? cache->length : 0;
  XGRAD_CHECK(tokens.shape.size() == 2 && cached + tokens.shape[1] <= options.block, "GPT", "tokens ", tokens.shape,
              " must be [N, T] with T <= block ", options.block, " - cached positions ", cached);
  for (std::size_t i = 0; cache && i < options.layers; ++i)  // before any layer writes to the cache
    XGRAD_CHECK(!block(i).keep_attention, "GPT", "block ", i,
                " keeps its attention map, drawn from the whole sequence at once: no key/value cache");
  const std::size_t T = tokens.shape[1];
  std::vector<std::int64_t> positions(T);
  for (std::size_t t = 0; t < T; ++t) positions[t] = static_cast<std::int64_t>(cached + t);
  Tensor x = wte->forward(tokens) + wpe->forward(Indices(positions, {T}));  // [N, T, C] + [T, C]
  if (cache) cache->layers.resize(options.layers);
  for (std::size_t i = 0; i < options.layers; ++i) {
    GPTBlock& b = block(i);
    x = cache ? b.forward(x, &cache->layers[i]) : recompute_ ? nn::recompute(b, x) : b.forward(x);
  }
  if (cache) cache->length += T;
  return matmul(ln_f->forward(x), wte->weight, /*transpose_a=*/false, /*transpose_b=*/true);  // tied head
}

GPTBlock& GPT::block(std::size_t i) const { return dynamic_cast<GPTBlock&>((*h)[i]); }

namespace {

// A token drawn from `logits` (one row) as SampleOptions says.
std::int64_t pick(std::vector<double> logits, const SampleOptions& o, Generator& gen) {
  const auto best = std::max_element(logits.begin(), logits.end());
  if (o.temperature == 0.0) return best - logits.begin();
  if (o.top_k > 0 && o.top_k < logits.size()) {
    std::vector<double> sorted = logits;
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(o.top_k - 1), sorted.end(),
                     std::greater<>());
    const double threshold = sorted[o.top_k - 1];
    for (double& l : logits)
      if (l < threshold) l = -std::numeric_limits<double>::infinity();
  }
  // Softmax of logits / temperature, shifted by the maximum, then one uniform draw.
  const double top = *best;
  double total = 0;
  for (double& l : logits) total += l = std::exp((l - top) / o.temperature);
  double u = gen.uniform() * total;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    u -= logits[i];
    if (u < 0) return static_cast<std::int64_t>(i);
  }
  return std::max_element(logits.begin(), logits.end()) - logits.begin();  // rounding left u >= 0
}

}  // namespace

std::size_t window_start(std::size_t context_length, std::size_t block) {
  if (context_length <= block) return 0;
  const std::size_t jump = std::max<std::size_t>(1, block / 2);
  return (context_length - block + jump - 1) / jump * jump;  // the first multiple of jump that fits
}

std::vector<std::int64_t> generate(models::CausalLM& model, std::vector<std::int64_t> context, std::size_t count,
                                   const SampleOptions& o, Generator& gen,
                                   const std::function<void(std::int64_t)>& each) {
  XGRAD_CHECK(!context.empty(), "generate", "needs at least one token of context");
  XGRAD_CHECK(o.temperature >= 0.0 && std::isfinite(o.temperature), "generate", "temperature ", o.temperature,
              " must be finite and >= 0");
  const std::size_t vocab = model.vocab_size(), block = model.max_positions();
  for (const std::int64_t t : context)
    XGRAD_CHECK(t >= 0 && static_cast<std::size_t>(t) < vocab, "generate", "token ", t,
                " is outside the vocabulary of ", vocab);
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  models::KVCache cache;
  std::size_t cache_start = 0;  // the context position of the cache's first entry
  const auto feed = [&](std::size_t begin, std::size_t end, models::KVCache* into) {
    const std::vector<std::int64_t> tokens(context.begin() + static_cast<std::ptrdiff_t>(begin),
                                           context.begin() + static_cast<std::ptrdiff_t>(end));
    const Tensor logits = model.forward(Indices(tokens, {1, end - begin}), into);
    const std::vector<double> all = logits.to_vector();
    return std::vector<double>(all.end() - static_cast<std::ptrdiff_t>(vocab), all.end());
  };
  for (std::size_t n = 0; n < count; ++n) {
    const std::size_t start = window_start(context.size(), block);
    std::vector<double> logits;
    if (!o.use_cache) {
      logits = feed(start, context.size(), nullptr);
    } else {
      if (start != cache_start) cache = models::KVCache(), cache_start = start;  // the window moved: rebuild
      logits = feed(cache_start + cache.length, context.size(), &cache);
    }
    if (o.vocabulary > 0 && o.vocabulary < logits.size()) logits.resize(o.vocabulary);
    // Finite weights can still overflow float32 on the way: a draw from NaN would be id 0
    // every time, text that looks generated.
    const auto bad = std::find_if(logits.begin(), logits.end(), [](double l) { return !std::isfinite(l); });
    XGRAD_CHECK(bad == logits.end(), "generate", "the model's logit for token ", bad - logits.begin(), " is ", *bad,
                " after ", context.size(), " tokens: its weights overflow float32");
    context.push_back(pick(std::move(logits), o, gen));
    if (each) each(context.back());
  }
  model.train(was_training);
  return context;
}

std::vector<optim::ParamGroup> decay_groups(const nn::Module& model, double weight_decay) {
  optim::ParamGroup decayed{{}, {{"weight_decay", weight_decay}}}, not_decayed{{}, {{"weight_decay", 0.0}}};
  for (auto& named : model.named_parameters())  // frozen weights (under LoRA) are not trained
    if (named.second.requires_grad()) (named.second.dim() >= 2 ? decayed : not_decayed).parameters.push_back(named);
  return {decayed, not_decayed};
}

}  // namespace tools
