#pragma once
// The model of `xgrad-train --task lm` and xgrad-generate: xgrad's own character-level GPT
// (--model gpt), or a published family under Hugging Face's names (--model gpt2 | llama,
// models/). A published model's sizes come, first found, from the checkpoint resumed
// (which records its config.json), a Hugging Face directory (--init-from DIR), a
// config.json (--model-config), or the flags (--layers, --heads, --d-model, --seq-len).

#include <memory>
#include <optional>

#include "config.hpp"
#include "xgrad/models/causal_lm.hpp"
#include "xgrad/nn/lora.hpp"

namespace tools {

// The checkpoint entry holding a published model's config.json.
inline constexpr const char* kModelConfigKey = "lm.model_config";

// True when --init-from names a Hugging Face directory rather than a checkpoint.
bool is_hf_directory(const std::string& path);
// The family of a Hugging Face directory's config.json ("gpt2", or "llama" for Llama's and
// Mistral's); a UsageError naming --init-from when it is not one xgrad builds.
std::string hf_model_family(const std::string& dir);

// Where a published model's config comes from, as messages name it ("--model-config
// big.json", "the checkpoint's lm.model_config"); empty when the flags size it.
std::string model_config_source(const Config& c, const Metadata* checkpoint);

// The published model's config for this run (nothing for --model gpt), checked against
// the data's vocabulary and --seq-len. `checkpoint`: the metadata of the checkpoint the
// run starts from, if any.
std::optional<xgrad::models::ModelConfig> language_model_config(const Config& c, std::size_t vocab,
                                                                const Metadata* checkpoint);

// The model, its weights drawn from the process-wide generator, or read from --init-from
// DIR; with LoRA adapters and recomputation as `c` says.
std::unique_ptr<xgrad::models::CausalLM> make_language_model(const Config& c, std::size_t vocab,
                                                             const Metadata* checkpoint);

// The LoRA adapters --lora and its options ask for (PEFT's LoraConfig).
xgrad::nn::LoRAConfig lora_config(const Config& c);

// A published model's config as a checkpoint records it; `source` names the checkpoint.
xgrad::models::ModelConfig recorded_model_config(const Metadata& metadata, const std::string& source);

}  // namespace tools
