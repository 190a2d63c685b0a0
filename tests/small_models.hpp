#pragma once
// The small published models the model suites share (test_models, test_onnx, test_gguf):
// every part present, sizes odd enough that a mixed-up axis shows (vocabulary 11 or 13,
// 3 heads of 4, an MLP of 20), quick enough for gradchecks in float64. No dropout.
#include "xgrad/models/config.hpp"

namespace xgrad::test {

inline models::GPT2Config small_gpt2(bool tied) {
  models::GPT2Config c;
  c.vocab_size = 11, c.n_positions = 9, c.n_embd = 12, c.n_layer = 2, c.n_head = 3, c.n_inner = 20;
  c.embd_pdrop = c.attn_pdrop = c.resid_pdrop = 0.0;
  c.tie_word_embeddings = tied;
  return c;
}

// 4 query heads of 4 columns over kv_heads K/V heads.
inline models::LlamaConfig small_llama(std::size_t kv_heads, bool tied) {
  models::LlamaConfig c;
  c.vocab_size = 13, c.hidden_size = 16, c.intermediate_size = 24, c.num_hidden_layers = 2;
  c.num_attention_heads = 4, c.num_key_value_heads = kv_heads, c.max_position_embeddings = 12;
  c.rope_theta = 500.0, c.tie_word_embeddings = tied;
  return c;
}

}  // namespace xgrad::test
