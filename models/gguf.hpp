#pragma once
// GGUF (version 3), the file llama.cpp and everything built on it runs: a published
// model's weights under llama.cpp's tensor names, the metadata its loader requires, and
// the tokenizer (byte-level BPE, as GPT-2's) embedded.
//
//   models::save_gguf(*model, tokenizer, "model.gguf", {.tensor_type = models::GgufTensorType::q8_0});
//
// Architectures: GPT-2 ("gpt2") with GELU's tanh form (gelu_new or gelu_pytorch_tanh), and Llama ("llama").
// Matrices are stored in the type asked for; vectors (norms, biases) always in F32, as
// llama.cpp's own converter stores them, and under Q8_0 a matrix whose rows are not a
// whole number of 32-value blocks in F16. Llama's q_proj and k_proj rows are reordered
// for llama.cpp's RoPE, which rotates adjacent pairs where Hugging Face rotates halves.
// The tokenizer's ids must cover the model's vocabulary exactly or fall short of it (the
// rest become unused tokens); special tokens are control tokens, "<|endoftext|>" (or the
// only special token) is BOS and EOS.
//
// What GGUF or llama.cpp cannot express is an Error naming it (GPT-2 with another
// activation, a tokenizer larger than the embedding table); the file appears whole or not
// at all, and an existing file is an Error unless `overwrite` is set. The bytes depend
// only on the config, the weights, the tokenizer and the options: the same model exported
// twice, or through a Hugging Face directory, gives the same file.

#include <string>
#include <string_view>

#include "xgrad/models/causal_lm.hpp"
#include "xgrad/text/tokenizer.hpp"

namespace xgrad::models {

enum class GgufTensorType { f32, f16, bf16, q8_0 };

// "f32", "f16", "bf16", "q8_0", and back (an Error naming the choices).
std::string_view gguf_tensor_type_name(GgufTensorType type);
GgufTensorType parse_gguf_tensor_type(std::string_view name);

struct GgufOptions {
  GgufTensorType tensor_type = GgufTensorType::f32;
  bool overwrite = false;
};

void save_gguf(const PretrainedModel& model, const text::Tokenizer& tokenizer, const std::string& path,
               const GgufOptions& options = {});

}  // namespace xgrad::models
