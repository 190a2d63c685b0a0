#include "language_model.hpp"

#include <filesystem>
#include <sstream>

#include "cli.hpp"
#include "finite.hpp"
#include "gpt.hpp"
#include "xgrad/models/pretrained.hpp"

namespace tools {

using namespace xgrad;

namespace {

// A published model sized by the flags: GPT-2's MLP 4x wide (or --ff), Llama's 8/3 x
// (rounded up to a multiple of 32, as its published sizes are) unless --ff is given.
models::ModelConfig config_from_flags(const Config& c, std::size_t vocab) {
  const auto size = [](int v) { return static_cast<std::size_t>(v); };
  if (c.model == "gpt2") {
    models::GPT2Config g;
    g.vocab_size = vocab, g.n_positions = size(c.seq_len), g.n_embd = size(c.d_model), g.n_layer = size(c.layers);
    g.n_head = size(c.heads), g.n_inner = size(c.ff);
    g.embd_pdrop = g.attn_pdrop = g.resid_pdrop = c.dropout;
    return g;
  }
  models::LlamaConfig l;
  l.vocab_size = vocab, l.hidden_size = size(c.d_model), l.num_hidden_layers = size(c.layers);
  l.num_attention_heads = size(c.heads), l.max_position_embeddings = size(c.seq_len);
  l.intermediate_size = c.ff > 0 ? size(c.ff) : (8 * size(c.d_model) / 3 + 31) / 32 * 32;
  l.attention_dropout = c.dropout;
  return l;
}

std::size_t config_vocab(const models::ModelConfig& config) {
  return std::visit([](const auto& c) { return c.vocab_size; }, config);
}

std::size_t config_positions(const models::ModelConfig& config) {
  if (const auto* g = std::get_if<models::GPT2Config>(&config)) return g->n_positions;
  return std::get<models::LlamaConfig>(config).max_position_embeddings;
}

}  // namespace

bool is_hf_directory(const std::string& path) {
  return !path.empty() && std::filesystem::is_directory(path) &&
         std::filesystem::exists(std::filesystem::path(path) / "config.json");
}

std::string hf_model_family(const std::string& dir) {
  try {
    return models::model_family(models::read_model_config((std::filesystem::path(dir) / "config.json").string()));
  } catch (const Error& e) {
    throw UsageError(str(flag(&Config::init_from), ": ", e.what()));
  }
}

models::ModelConfig recorded_model_config(const Metadata& metadata, const std::string& source) {
  const auto found = metadata.find(kModelConfigKey);
  if (found == metadata.end()) throw UsageError(str(source, ": ", kModelConfigKey, " is missing"));
  try {
    return models::parse_model_config(found->second, str(source, ": ", kModelConfigKey));
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

std::string model_config_source(const Config& c, const Metadata* checkpoint) {
  if (checkpoint && checkpoint->count(kModelConfigKey)) return "the checkpoint's " + std::string(kModelConfigKey);
  if (is_hf_directory(c.init_from)) return str(flag(&Config::init_from), " ", c.init_from);
  if (!c.model_config.empty()) return str(flag(&Config::model_config), " ", c.model_config);
  return "";
}

std::optional<models::ModelConfig> language_model_config(const Config& c, std::size_t vocab,
                                                         const Metadata* checkpoint) {
  if (!c.published_model()) return std::nullopt;
  const std::string source = model_config_source(c, checkpoint);
  if (source.empty()) return config_from_flags(c, vocab);
  models::ModelConfig config;
  try {
    if (checkpoint && checkpoint->count(kModelConfigKey)) {
      config = recorded_model_config(*checkpoint, source);
    } else if (is_hf_directory(c.init_from)) {
      config = models::read_model_config((std::filesystem::path(c.init_from) / "config.json").string());
    } else {
      check_input_exists(flag(&Config::model_config).dashed(), c.model_config);
      config = models::read_model_config(c.model_config);
    }
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  if (models::model_family(config) != c.model)
    throw UsageError(str(source, " describes a ", models::model_type(config), " model, but ", flag(&Config::model),
                         " is ", c.model));
  if (config_vocab(config) < vocab)
    throw UsageError(str(source, ": its vocab_size ", config_vocab(config),
                         " is smaller than the data's vocabulary of ", vocab, " tokens"));
  // A model of a text's bytes numbers the distinct bytes of its text in order; a folder
  // keeps no such alphabet (a checkpoint does), so their count at least must agree.
  if (c.data.empty() && is_hf_directory(c.init_from) && config_vocab(config) != vocab)
    throw UsageError(str(source, ": its vocab_size ", config_vocab(config), " is not the ", vocab,
                         " distinct bytes of ", flag(&Config::text), " ", c.text,
                         ": a model of a text's bytes goes on with a text of the same characters"));
  if (config_positions(config) < static_cast<std::size_t>(c.seq_len))
    throw UsageError(str(source, ": it takes at most ", config_positions(config), " positions, fewer than ",
                         flag(&Config::seq_len), " ", c.seq_len));
  return config;
}

nn::LoRAConfig lora_config(const Config& c) {
  nn::LoRAConfig lora;
  lora.r = static_cast<std::size_t>(c.lora);
  lora.lora_alpha = c.lora_alpha;
  lora.lora_dropout = c.lora_dropout;
  std::stringstream targets(c.lora_targets);
  for (std::string name; std::getline(targets, name, ',');)
    if (!name.empty()) lora.target_modules.push_back(name);
  lora.fan_in_fan_out = c.model == "gpt2";  // GPT-2's files hold its projections as Conv1D
  lora.base_model_name_or_path = c.base_model;
  return lora;
}

std::unique_ptr<models::CausalLM> make_language_model(const Config& c, std::size_t vocab, const Metadata* checkpoint) {
  std::unique_ptr<models::CausalLM> model;
  const std::optional<models::ModelConfig> config = language_model_config(c, vocab, checkpoint);
  if (!config) {
    const auto size = [](int v) { return static_cast<std::size_t>(v); };
    model = std::make_unique<GPT>(GPTOptions{.vocab = vocab,
                                             .block = size(c.seq_len),
                                             .layers = size(c.layers),
                                             .heads = size(c.heads),
                                             .d_model = size(c.d_model)});
  } else if (!checkpoint && is_hf_directory(c.init_from)) {
    try {
      model = models::load_pretrained(c.init_from);
    } catch (const Error& e) {
      throw UsageError(str(flag(&Config::init_from), ": ", e.what()));
    }
    if (const std::optional<std::string> bad = first_nonfinite(*model); bad && !c.allow_nonfinite)
      throw UsageError(str(flag(&Config::init_from), " ", c.init_from, ": the tensor ", *bad,
                           " holds NaN or infinite values (refusing it; ", flag(&Config::allow_nonfinite),
                           " goes on)"));
  } else {
    model = models::make_model(*config);
  }
  model->set_recompute(c.recompute);
  if (c.lora > 0) {
    if (lora_config(c).target_modules.empty()) throw SettingError(flag(&Config::lora_targets), " names no layer");
    try {
      nn::apply_lora(*model, lora_config(c));
    } catch (const Error& e) {
      throw SettingError(flag(&Config::lora_targets), str(" ", c.lora_targets, ": ", e.what()));
    }
  }
  return model;
}

}  // namespace tools
