#pragma once
// The configs of the published model families, field for field as Hugging Face's
// config.json names them, so that a config.json reads into one and one writes back out
// as a file Hugging Face reads.
//
// Reading: the fields that fix the tensors' shapes are required (GPT-2: vocab_size,
// n_positions, n_embd, n_layer, n_head; Llama: vocab_size, hidden_size,
// intermediate_size, num_hidden_layers, num_attention_heads); the others take Hugging
// Face's defaults when absent, fields xgrad does not use ("transformers_version", ...) are
// ignored, and the token ids (bos_token_id, eos_token_id, pad_token_id) are kept to be
// written back. A field of the wrong type, a value out of range or a
// feature xgrad does not implement (yarn's rope scaling, attention biases on Llama, ...) is
// an Error naming the file and the field. Both generations of transformers' RoPE fields are
// read: rope_theta and rope_scaling (4.x), or rope_parameters (5.x; rope_theta inside).

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace xgrad::text {
class Tokenizer;
}

namespace xgrad::models {

// What config.json says the ids stand for. The ids of the tokens that begin and end a
// text, and pad it (transformers' generate() stops at eos_token_id): kept as the file
// wrote them, JSON text ("50256", "[128001, 128009]", "null"); empty when absent. xgrad
// runs nothing by them. And, for a model of a text's bytes (xgrad-train --text), which has
// no tokenizer, the byte each id stands for: xgrad's own field "xgrad_text_bytes", the
// text's distinct bytes in increasing order (at most vocab_size of them); empty when absent.
struct TokenIdFields {
  std::string bos_token_id, eos_token_id, pad_token_id;
  std::vector<std::uint8_t> text_bytes;
  bool operator==(const TokenIdFields&) const = default;
};

// GPT2Config (transformers' GPT2Config).
struct GPT2Config {
  std::size_t vocab_size = 50257;
  std::size_t n_positions = 1024;  // the longest context (the learned position table's rows)
  std::size_t n_embd = 768;
  std::size_t n_layer = 12;
  std::size_t n_head = 12;
  std::size_t n_inner = 0;  // the MLP's width; 0 (null in the file): 4 * n_embd
  double layer_norm_epsilon = 1e-5;
  // "gelu_new" (GELU's tanh form, GPT-2's own), "gelu" (exact) or "relu".
  std::string activation_function = "gelu_new";
  double embd_pdrop = 0.1, attn_pdrop = 0.1, resid_pdrop = 0.1;  // dropout, in training
  double initializer_range = 0.02;
  bool tie_word_embeddings = true;  // the output head is wte's weight
  TokenIdFields token_ids;

  std::size_t inner() const { return n_inner ? n_inner : 4 * n_embd; }
};

// How a Llama's RoPE frequencies are scaled for contexts longer than it was trained on
// (config.json's rope_scaling, or transformers 5's rope_parameters; models::
// scaled_rope_frequencies computes them):
//   "default"  plain RoPE, theta^(-2i / head_dim);
//   "linear"   every frequency divided by `factor` (positions interpolated);
//   "llama3"   Llama 3.1's: frequencies whose wavelength is under original_max_position_
//              embeddings / high_freq_factor kept, over original / low_freq_factor divided
//              by factor, those between blended smoothly.
// Those that depend on each call's length ("dynamic") or scale attention too ("yarn",
// "longrope") are refused by name.
struct RopeScaling {
  std::string rope_type = "default";
  double factor = 1.0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;
  std::size_t original_max_position_embeddings = 8192;

  bool operator==(const RopeScaling&) const = default;
};

// LlamaConfig (transformers' LlamaConfig), and MistralConfig: Mistral's files are Llama's
// layout and names with a sliding window over the keys (each query sees the last
// `sliding_window` positions, itself included), as transformers' MistralForCausalLM.
struct LlamaConfig {
  std::string model_type = "llama";  // "llama" or "mistral"
  std::size_t sliding_window = 0;    // mistral: the keys each query sees; 0 (null in the file): all
  std::size_t vocab_size = 32000;
  std::size_t hidden_size = 4096;
  std::size_t intermediate_size = 11008;
  std::size_t num_hidden_layers = 32;
  std::size_t num_attention_heads = 32;
  std::size_t num_key_value_heads = 0;  // 0 (absent): num_attention_heads, no grouping
  std::size_t head_dim = 0;             // each head's width; 0 (absent): hidden_size / num_attention_heads
  std::size_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  double attention_dropout = 0.0;
  double initializer_range = 0.02;
  bool tie_word_embeddings = false;
  TokenIdFields token_ids;

  std::size_t kv_heads() const { return num_key_value_heads ? num_key_value_heads : num_attention_heads; }
  std::size_t head_width() const { return head_dim ? head_dim : hidden_size / num_attention_heads; }
  // q_proj's output and o_proj's input: every query head's columns side by side.
  std::size_t attention_width() const { return num_attention_heads * head_width(); }
};

using ModelConfig = std::variant<GPT2Config, LlamaConfig>;

// "gpt2", "llama" or "mistral": config.json's model_type.
std::string model_type(const ModelConfig& config);
// The layout it is built with: "gpt2", or "llama" (Mistral's too).
std::string model_family(const ModelConfig& config);

// Parses config.json's text; `source` names the file in errors. The result is checked.
ModelConfig parse_model_config(const std::string& json_text, const std::string& source);
ModelConfig read_model_config(const std::string& path);
// config.json's text, with model_type, architectures and every field above. The token
// ids kept are written as read; bos_token_id and eos_token_id the config does not give come
// from `tokenizer` (text::text_bounds), else are null (transformers' defaults, 50256 for
// GPT-2, 1 and 2 for Llama, would be other tokens of another vocabulary); the text bytes
// the config does not give, from `text_bytes`. torch_dtype names the tensors' dtype.
struct ConfigJsonOptions {
  const text::Tokenizer* tokenizer = nullptr;
  const std::vector<std::uint8_t>* text_bytes = nullptr;
  std::string torch_dtype = "float32";
};
std::string model_config_json(const ModelConfig& config, const ConfigJsonOptions& options = {});

// Each pair's RoPE frequency in a Llama head (head_dim / 2 of them), rope_scaling applied:
// what the model turns q and k by, and what the GGUF and ONNX exports write.
std::vector<double> scaled_rope_frequencies(const LlamaConfig& config);

// What a model of this config holds: its parameters (tied embeddings counted once, an
// untied head) and its tensors, in double so that no size overflows.
struct ModelSize {
  double parameters = 0, tensors = 0;
};
ModelSize model_size(const ModelConfig& config);

// Errors for sizes a model cannot be built with (a zero width, heads not dividing the
// width, an odd head width under RoPE, ...); `source` starts the message.
void check_config(const ModelConfig& config, const std::string& source);

}  // namespace xgrad::models
