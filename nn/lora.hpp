#pragma once
// LoRA fine-tuning of a whole model, and adapters in PEFT's files.
//
// apply_lora puts an adapter (nn/linear.hpp, Linear::add_lora) on every Linear that
// config.target_modules names and freezes every other parameter, so an optimizer built
// from trainable_parameters(model) trains, and holds state for, the adapters alone.
//
//   auto paths = nn::apply_lora(model, {.r = 8, .lora_alpha = 16, .target_modules = {"q_proj", "v_proj"}});
//   optim::AdamW adam(nn::trainable_parameters(model), {.lr = 1e-4});
//   ... train ...
//   nn::save_adapter("adapter", model, config);  // adapter/adapter_model.safetensors, adapter_config.json
//   nn::load_adapter("adapter", other_model);      // the same adapters on a fresh base model
//   nn::merge_lora(model);                         // W += scaling * B A; the adapters are gone
//
// Targets follow PEFT: a name matches each Linear whose dotted path equals it or ends
// with "." + name ("q_proj" matches "model.layers.0.self_attn.q_proj"); target_regex
// instead is one regular expression the whole path must match (PEFT's target_modules
// given as a string; ECMAScript syntax, which agrees with Python's re for the usual
// patterns: alternation, classes, ".*", escapes). The Linears under an adapted Linear
// (its lora_A and lora_B) are never targets.
//
// PEFT's files, which PEFT's PeftModel.from_pretrained reads and writes:
//   adapter_model.safetensors  "base_model.model.<path>.lora_A.weight" [r, in] and
//                              "base_model.model.<path>.lora_B.weight" [out, r], float32
//   adapter_config.json        LoraConfig's fields: peft_type "LORA", r, lora_alpha,
//                              lora_dropout, target_modules, use_rslora, fan_in_fan_out,
//                              task_type, base_model_name_or_path, bias "none", ...
// Each file is written atomically (nn/checkpoint.hpp); both are built in memory first, so
// bad input leaves nothing written. Reading a config refuses the PEFT settings this code
// does not implement (DoRA, biases, modules_to_save, per-layer ranks, ...) by name,
// rather than loading an adapter that would compute something else.

#include <string>
#include <vector>

#include "xgrad/nn/linear.hpp"
#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

// PEFT's LoraConfig, under its names, for the fields this code uses.
struct LoRAConfig {
  std::size_t r = 8;
  double lora_alpha = 8.0;
  double lora_dropout = 0.0;
  // Names matched as PEFT's list of target_modules...
  std::vector<std::string> target_modules = {};
  // ...or, instead, one regular expression for the whole path (written to the file as
  // target_modules, a string, as PEFT does).
  std::string target_regex = {};
  bool use_rslora = false;  // scaling alpha / sqrt(r) instead of alpha / r
  // For PEFT only: true where the checkpoint stores the layer as [in, out] (GPT-2's
  // Conv1D). lora_A and lora_B have the same shapes either way, and xgrad's Linear is
  // [out, in] whatever this says.
  bool fan_in_fan_out = false;
  std::string task_type = "CAUSAL_LM";
  std::string base_model_name_or_path = {};  // null in the file when empty

  // rank, alpha, dropout and rslora as one adapter takes them.
  LoRAOptions options() const;
};

// Adds an adapter to every Linear under `root` (root included) that the config targets,
// then freezes every parameter but the adapters'. Returns the paths adapted, in the
// model's order. An Error, with the model unchanged, when a target matches no Linear
// (naming it), when a targeted Linear already has an adapter, or when the settings are
// out of range (r 0, lora_alpha not positive, lora_dropout outside [0, 1)).
std::vector<std::string> apply_lora(Module& root, const LoRAConfig& config);

// Folds every adapter into its Linear (W += scaling * B A) and removes it, so the
// "lora_A"/"lora_B" names disappear. Returns the paths merged. No parameter's
// requires_grad changes: what apply_lora froze stays frozen (unfreeze what you want to
// train next), so a model is never left half frozen.
std::vector<std::string> merge_lora(Module& root);

// Freezes every parameter under root except the adapters' lora_A and lora_B weights.
void freeze_all_but_lora(Module& root);

// The parameters with requires_grad, by name: what an optimizer should be given.
NamedTensors trainable_parameters(const Module& root);

// The two files of an adapter's folder, PEFT's names.
inline constexpr const char* kAdapterWeightsFile = "adapter_model.safetensors";
inline constexpr const char* kAdapterConfigFile = "adapter_config.json";

// Writes <dir>/adapter_model.safetensors and <dir>/adapter_config.json (the folder is
// made if missing). The model's adapters must be those `config` describes: on exactly the
// Linears it targets, each with its r, alpha, dropout and rslora; else an Error naming
// the path, with nothing written.
void save_adapter(const std::string& dir, const Module& model, const LoRAConfig& config);

// Reads an adapter_config.json: an Error naming the file and the field when a field is
// missing (peft_type, r, lora_alpha, target_modules), of the wrong type or out of range,
// or asks for something this code does not implement.
LoRAConfig read_adapter_config(const std::string& path);

// Reads both files of `dir`, adds their adapters to `model` (as apply_lora, so the rest is
// frozen) and loads their weights (converted to the model's dtype). Returns the config.
// Everything is checked first (the config, missing and unexpected keys by name, shapes
// with both shapes); on any Error the model is unchanged.
LoRAConfig load_adapter(const std::string& dir, Module& model);

}  // namespace xgrad::nn
