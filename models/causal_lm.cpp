#include "xgrad/models/causal_lm.hpp"

#include "xgrad/autograd/ops.hpp"
#include "xgrad/models/gpt2.hpp"
#include "xgrad/models/llama.hpp"

namespace xgrad::models {

namespace {

// The columns of a range as a tensor of their own.
Tensor materialize(const Columns& c) {
  const std::size_t width = c.width ? c.width : c.tensor.shape().back() - c.begin;
  if (c.begin == 0 && width == c.tensor.shape().back()) return c.tensor;
  return slice(c.tensor, 2, c.begin, c.begin + width);
}

}  // namespace

std::unique_ptr<PretrainedModel> make_model(const ModelConfig& config) {
  if (const auto* gpt2 = std::get_if<GPT2Config>(&config)) return std::make_unique<GPT2LMHeadModel>(*gpt2);
  return std::make_unique<LlamaForCausalLM>(std::get<LlamaConfig>(config));
}

void check_cache(const char* model, const KVCache& cache, std::size_t layers, std::size_t batch, std::size_t kv_width,
                 DType dtype) {
  if (cache.length == 0) {
    for (std::size_t i = 0; i < cache.layers.size(); ++i)
      XGRAD_CHECK(!cache.layers[i].keys.defined() && !cache.layers[i].values.defined(), model,
                  "the KVCache's length is 0 but its layer ", i, " holds keys or values");
    return;
  }
  XGRAD_CHECK(cache.layers.size() == layers, model, "the KVCache holds ", cache.layers.size(),
              " layers' keys and values, the model has ", layers, " layers: a cache is one model's");
  const Shape expected{batch, cache.length, kv_width};
  for (std::size_t i = 0; i < layers; ++i)
    for (const Tensor* t : {&cache.layers[i].keys, &cache.layers[i].values}) {
      XGRAD_CHECK(t->defined(), model, "the KVCache's layer ", i, " holds no ",
                  t == &cache.layers[i].keys ? "keys" : "values", " but its length is ", cache.length);
      XGRAD_CHECK(t->shape() == expected && t->dtype() == dtype, model, "the KVCache's layer ", i, " ",
                  t == &cache.layers[i].keys ? "keys" : "values", " ", t->dtype(), " ", t->shape(), " do not fit ",
                  dtype, " ", expected, " (tokens of batch ", batch, ", its length ", cache.length,
                  ", the model's K/V width ", kv_width, "): a cache is one model's, for one batch of prompts");
    }
}

Tensor causal_self_attention(const Columns& q, const Columns& k, const Columns& v, std::size_t heads,
                             std::size_t kv_heads, double dropout, KVCache::Layer* cache, std::size_t window) {
  AttentionOptions options;
  options.dropout_p = dropout;
  const std::size_t earlier = cache && cache->keys.defined() ? cache->keys.shape()[1] : 0;
  if (cache) {
    cache->keys = earlier ? concat({cache->keys, materialize(k)}, 1) : materialize(k);
    cache->values = earlier ? concat({cache->values, materialize(v)}, 1) : materialize(v);
  }
  const std::size_t T = q.tensor.shape()[1], S = earlier + T;
  const bool windowed = window > 0 && S > window;
  if (earlier == 0) {  // the kernel's causal mask, and its sliding window where the sequence is longer
    options.is_causal = true;
    options.window = windowed ? window : 0;
  } else if (T > 1 || windowed) {  // query i (position earlier + i) sees keys j <= earlier + i, and within the window
    // Every layer asks for the same mask in one forward: made once, kept for the next.
    thread_local struct {
      std::size_t T = 0, S = 0, earlier = 0, window = 0;
      Tensor mask;
    } last;
    if (!last.mask.defined() || last.T != T || last.S != S || last.earlier != earlier || last.window != window) {
      std::vector<double> allowed(T * S);
      for (std::size_t i = 0; i < T; ++i) {
        const std::size_t position = earlier + i;
        const std::size_t first = windowed && position >= window ? position - window + 1 : 0;
        for (std::size_t j = first; j <= position; ++j) allowed[i * S + j] = 1;
      }
      last = {T, S, earlier, window, Tensor::from_vector(allowed, {T, S})};
    }
    options.mask = last.mask;
  }
  if (!cache) return multi_head_attention(q, k, v, heads, kv_heads, /*batch_first=*/true, options).output;
  return multi_head_attention(q, {cache->keys}, {cache->values}, heads, kv_heads, /*batch_first=*/true, options).output;
}

std::map<std::string, Shape> PretrainedModel::hf_shapes() const {
  std::map<std::string, Shape> shapes;
  for (const auto& [name, tensor] : state_dict()) shapes.emplace(name, tensor.shape());
  return shapes;
}

}  // namespace xgrad::models
