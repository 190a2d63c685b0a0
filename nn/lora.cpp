#include "xgrad/nn/lora.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "xgrad/autograd/files.hpp"
#include "xgrad/nn/checkpoint.hpp"

namespace xgrad::nn {

namespace {

using json = nlohmann::json;

constexpr const char* kKeyPrefix = "base_model.model.";  // PEFT's PeftModel -> LoraModel -> the model

struct NamedLinear {
  std::string path;
  Linear* linear;
};

// Every Linear under root (root included, path ""), parents first, children in
// registration order; a module held at two paths is visited at the first. Adapters (the
// Linears inside a Linear) are not listed.
std::vector<NamedLinear> linears_under(Module& root) {
  std::vector<NamedLinear> found;
  std::unordered_set<const Module*> seen;
  std::vector<std::pair<std::string, Module*>> stack{{"", &root}};
  while (!stack.empty()) {
    auto [path, module] = stack.back();
    stack.pop_back();
    if (!seen.insert(module).second) continue;
    if (auto* linear = dynamic_cast<Linear*>(module)) {
      found.push_back({path, linear});
      continue;
    }
    const auto& children = module->named_children();
    for (auto it = children.rbegin(); it != children.rend(); ++it)
      stack.emplace_back(path.empty() ? it->first : path + "." + it->first, it->second.get());
  }
  return found;
}

bool ends_with_component(const std::string& path, const std::string& name) {
  return path == name ||
         (path.size() > name.size() && path.ends_with(name) && path[path.size() - name.size() - 1] == '.');
}

// The Linears the config targets. An Error names a target that matches none.
std::vector<NamedLinear> targeted_linears(Module& root, const LoRAConfig& config, const std::string& op) {
  const bool by_names = !config.target_modules.empty(), by_regex = !config.target_regex.empty();
  XGRAD_CHECK(by_names != by_regex, op,
              by_names ? "give target_modules or target_regex, not both" : "no target_modules (nor target_regex)");
  const std::vector<NamedLinear> linears = linears_under(root);
  std::vector<NamedLinear> targets;
  if (by_regex) {
    std::regex pattern;
    try {
      pattern = std::regex(config.target_regex);
    } catch (const std::regex_error& e) {
      fail(op, "target regex '", config.target_regex, "' is not a valid regular expression (", e.what(), ")");
    }
    for (const NamedLinear& l : linears)
      if (std::regex_match(l.path, pattern)) targets.push_back(l);
    XGRAD_CHECK(!targets.empty(), op, "target regex '", config.target_regex, "' matches no Linear's path");
    return targets;
  }
  for (const std::string& name : config.target_modules) {
    XGRAD_CHECK(std::any_of(linears.begin(), linears.end(),
                            [&](const NamedLinear& l) { return ends_with_component(l.path, name); }),
                op, "target module '", name, "' matches no Linear");
  }
  for (const NamedLinear& l : linears)
    if (std::any_of(config.target_modules.begin(), config.target_modules.end(),
                    [&](const std::string& name) { return ends_with_component(l.path, name); }))
      targets.push_back(l);
  return targets;
}

void check_options(const LoRAConfig& config, const std::string& op) {
  XGRAD_CHECK(config.r >= 1, op, "r must be at least 1, got ", config.r);
  XGRAD_CHECK(std::isfinite(config.lora_alpha) && config.lora_alpha > 0, op, "lora_alpha must be positive, got ",
              config.lora_alpha);
  XGRAD_CHECK(config.lora_dropout >= 0.0 && config.lora_dropout < 1.0, op, "lora_dropout ", config.lora_dropout,
              " is outside [0, 1)");
}

// The Linears to adapt, checked so that adapting them cannot fail halfway.
std::vector<NamedLinear> adaptable_targets(Module& root, const LoRAConfig& config, const std::string& op) {
  check_options(config, op);
  std::vector<NamedLinear> targets = targeted_linears(root, config, op);
  for (const NamedLinear& t : targets)
    XGRAD_CHECK(!t.linear->has_lora(), op, "'", t.path, "' already has a LoRA adapter");
  return targets;
}

std::string key_of(const std::string& path, const char* factor) {
  return kKeyPrefix + (path.empty() ? "" : path + ".") + factor + ".weight";
}

std::string join_path(const std::string& dir, const char* file) { return (std::filesystem::path(dir) / file).string(); }

// ---- adapter_config.json ----

json config_to_json(const LoRAConfig& config) {
  const double alpha = config.lora_alpha;
  // PEFT's lora_alpha is an int; a whole number is written as one.
  const json alpha_value =
      alpha == std::floor(alpha) && alpha < 1e15 ? json(static_cast<std::int64_t>(alpha)) : json(alpha);
  const json targets = config.target_regex.empty() ? json(config.target_modules) : json(config.target_regex);
  const auto or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  // The fields PEFT's LoraConfig.to_dict() writes, with its defaults for what xgrad does
  // not implement; PEFT fills in any field a newer version adds.
  return json{{"alpha_pattern", json::object()},
              {"auto_mapping", nullptr},
              {"base_model_name_or_path", or_null(config.base_model_name_or_path)},
              {"bias", "none"},
              {"corda_config", nullptr},
              {"eva_config", nullptr},
              {"exclude_modules", nullptr},
              {"fan_in_fan_out", config.fan_in_fan_out},
              {"inference_mode", true},  // as PEFT's save_pretrained writes it
              {"init_lora_weights", true},
              {"layer_replication", nullptr},
              {"layers_pattern", nullptr},
              {"layers_to_transform", nullptr},
              {"loftq_config", json::object()},
              {"lora_alpha", alpha_value},
              {"lora_bias", false},
              {"lora_dropout", config.lora_dropout},
              {"megatron_config", nullptr},
              {"megatron_core", "megatron.core"},
              {"modules_to_save", nullptr},
              {"peft_type", "LORA"},
              {"r", config.r},
              {"rank_pattern", json::object()},
              {"revision", nullptr},
              {"target_modules", targets},
              {"task_type", or_null(config.task_type)},
              {"use_dora", false},
              {"use_rslora", config.use_rslora}};
}

// PEFT settings that change what an adapter computes or which tensors it has; each is
// refused unless absent, null, false, "none" (bias) or empty.
constexpr const char* kUnsupportedFields[] = {"use_dora",
                                              "bias",
                                              "lora_bias",
                                              "modules_to_save",
                                              "layers_to_transform",
                                              "rank_pattern",
                                              "alpha_pattern",
                                              "exclude_modules",
                                              "target_parameters",
                                              "layer_replication",
                                              "trainable_token_indices",
                                              "alora_invocation_tokens",
                                              "use_qalora",
                                              "use_bdlora",
                                              "arrow_config",
                                              "kasa_config",
                                              "velora_config",
                                              "monteclora_config"};

bool is_neutral(const std::string& field, const json& value) {
  if (value.is_null() || value == false) return true;
  if ((value.is_object() || value.is_array()) && value.empty()) return true;
  return field == "bias" && value == "none";
}

class ConfigReader {
 public:
  ConfigReader(const json& fields, std::string op) : fields_(fields), op_(std::move(op)) {}

  // Null or absent.
  const json* optional(const char* field) const {
    const auto it = fields_.find(field);
    return it == fields_.end() || it->is_null() ? nullptr : &*it;
  }
  const json& required(const char* field) const {
    const json* value = optional(field);
    XGRAD_CHECK(value, op_, "field '", field, "' is missing");
    return *value;
  }
  [[noreturn]] void wrong(const char* field, const json& value, const char* expected) const {
    fail(op_, "field '", field, "' must be ", expected, ", got ", value.dump());
  }
  std::string string(const json& value, const char* field) const {
    if (!value.is_string()) wrong(field, value, "a string");
    return value.get<std::string>();
  }
  bool flag(const char* field, bool otherwise) const {
    const json* value = optional(field);
    if (!value) return otherwise;
    if (!value->is_boolean()) wrong(field, *value, "true or false");
    return value->get<bool>();
  }
  double number(const json& value, const char* field, const char* expected) const {
    if (!value.is_number()) wrong(field, value, expected);
    return value.get<double>();
  }
  const std::string& op() const { return op_; }

 private:
  const json& fields_;
  std::string op_;
};

LoRAConfig config_from_json(const json& fields, const std::string& op) {
  XGRAD_CHECK(fields.is_object(), op, "is not a JSON object");
  const ConfigReader read(fields, op);
  const std::string peft_type = read.string(read.required("peft_type"), "peft_type");
  XGRAD_CHECK(peft_type == "LORA", op, "field 'peft_type' is \"", peft_type, "\"; only LoRA adapters (\"LORA\") load");
  for (const char* field : kUnsupportedFields)
    if (const auto it = fields.find(field); it != fields.end() && !is_neutral(field, *it))
      fail(op, "field '", field, "' is ", it->dump(), ", which xgrad's LoRA does not implement");

  LoRAConfig config;
  const json& r = read.required("r");
  if (!r.is_number_unsigned() || r.get<std::uint64_t>() == 0) read.wrong("r", r, "a positive integer");
  config.r = r.get<std::size_t>();
  const json& alpha = read.required("lora_alpha");
  config.lora_alpha = read.number(alpha, "lora_alpha", "a positive number");
  if (!(config.lora_alpha > 0) || !std::isfinite(config.lora_alpha))
    read.wrong("lora_alpha", alpha, "a positive number");
  if (const json* dropout = read.optional("lora_dropout")) {
    config.lora_dropout = read.number(*dropout, "lora_dropout", "a number in [0, 1)");
    if (!(config.lora_dropout >= 0 && config.lora_dropout < 1))
      read.wrong("lora_dropout", *dropout, "a number in [0, 1)");
  }
  const json& targets = read.required("target_modules");
  if (targets.is_string()) {
    config.target_regex = targets.get<std::string>();
    XGRAD_CHECK(config.target_regex != "all-linear", op,
                "target_modules \"all-linear\" is not supported: list the module names");
  } else if (targets.is_array() && !targets.empty() &&
             std::all_of(targets.begin(), targets.end(), [](const json& t) { return t.is_string(); })) {
    config.target_modules = targets.get<std::vector<std::string>>();
  } else {
    read.wrong("target_modules", targets, "a non-empty list of module names or a regular expression");
  }
  config.use_rslora = read.flag("use_rslora", false);
  config.fan_in_fan_out = read.flag("fan_in_fan_out", false);
  const json* task_type = read.optional("task_type");
  config.task_type = task_type ? read.string(*task_type, "task_type") : "";
  if (const json* base = read.optional("base_model_name_or_path"))
    config.base_model_name_or_path = read.string(*base, "base_model_name_or_path");
  return config;
}

// The adapter shapes each key must have for these targets.
std::map<std::string, Shape> expected_shapes(const std::vector<NamedLinear>& targets, std::size_t r) {
  std::map<std::string, Shape> shapes;
  for (const NamedLinear& t : targets) {
    shapes[key_of(t.path, "lora_A")] = {r, t.linear->in_features};
    shapes[key_of(t.path, "lora_B")] = {t.linear->out_features, r};
  }
  return shapes;
}

void check_adapter_tensors(const SafetensorsContents& contents, const std::map<std::string, Shape>& shapes,
                           const std::string& op) {
  std::vector<std::string> missing, unexpected, mismatched, not_float;
  for (const auto& [key, shape] : shapes) {
    const auto it = contents.tensors.find(key);
    if (it == contents.tensors.end())
      missing.push_back(key);
    else if (it->second.shape() != shape)
      mismatched.push_back(str(key, " is ", it->second.shape(), " in the file, the model needs ", shape));
  }
  for (const auto& [key, tensor] : contents.tensors) {
    if (!shapes.contains(key)) unexpected.push_back(key);
    const auto dtype = contents.dtypes.find(key);
    if (dtype != contents.dtypes.end() && dtype->second != "F32" && dtype->second != "F64" && dtype->second != "F16" &&
        dtype->second != "BF16")
      not_float.push_back(str(key, " (", dtype->second, ")"));
  }
  std::string problems;
  const auto list = [&problems](const char* what, const std::vector<std::string>& items) {
    if (!items.empty()) problems += str(problems.empty() ? "" : "; ", what, ": ", listed(items));
  };
  list("missing", missing);
  list("unexpected", unexpected);
  list("shape mismatch", mismatched);
  list("not floating point", not_float);
  XGRAD_CHECK(problems.empty(), op, problems);
}

}  // namespace

LoRAOptions LoRAConfig::options() const {
  return {.rank = r, .alpha = lora_alpha, .dropout = lora_dropout, .rslora = use_rslora};
}

std::vector<std::string> apply_lora(Module& root, const LoRAConfig& config) {
  std::vector<std::string> paths;
  for (const NamedLinear& t : adaptable_targets(root, config, "apply_lora")) {
    t.linear->add_lora(config.options());
    paths.push_back(t.path);
  }
  freeze_all_but_lora(root);
  return paths;
}

std::vector<std::string> merge_lora(Module& root) {
  std::vector<std::string> paths;
  for (const NamedLinear& l : linears_under(root))
    if (l.linear->has_lora()) {
      l.linear->merge_lora();
      paths.push_back(l.path);
    }
  return paths;
}

void freeze_all_but_lora(Module& root) {
  for (Tensor& p : root.parameters()) p.requires_grad_(false);
  for (const NamedLinear& l : linears_under(root))
    if (l.linear->has_lora()) {
      l.linear->lora_A->weight.requires_grad_(true);
      l.linear->lora_B->weight.requires_grad_(true);
    }
}

NamedTensors trainable_parameters(const Module& root) {
  NamedTensors trainable;
  for (const auto& [name, p] : root.named_parameters())
    if (p.requires_grad()) trainable.emplace_back(name, p);
  return trainable;
}

void save_adapter(const std::string& dir, const Module& model, const LoRAConfig& config) {
  const std::string op = "save_adapter '" + dir + "'";
  check_options(config, op);
  // Reads only: the walk hands out Linears it could change.
  Module& root = const_cast<Module&>(model);
  const std::vector<NamedLinear> targets = targeted_linears(root, config, op);
  std::set<std::string> targeted;
  StateDict tensors;
  for (const NamedLinear& t : targets) {
    targeted.insert(t.path);
    XGRAD_CHECK(t.linear->has_lora(), op, "'", t.path, "' is a target of the config but has no LoRA adapter");
    const LoRAOptions& have = t.linear->lora_options();
    XGRAD_CHECK(have.rank == config.r && have.alpha == config.lora_alpha && have.dropout == config.lora_dropout &&
                    have.rslora == config.use_rslora,
                op, "'", t.path, "' has an adapter of rank ", have.rank, ", alpha ", have.alpha, ", dropout ",
                have.dropout, ", rslora ", have.rslora, " but the config says r ", config.r, ", lora_alpha ",
                config.lora_alpha, ", lora_dropout ", config.lora_dropout, ", use_rslora ", config.use_rslora);
    tensors.emplace(key_of(t.path, "lora_A"), t.linear->lora_A->weight.detach().to(DType::float32));
    tensors.emplace(key_of(t.path, "lora_B"), t.linear->lora_B->weight.detach().to(DType::float32));
  }
  for (const NamedLinear& l : linears_under(root))
    XGRAD_CHECK(!l.linear->has_lora() || targeted.contains(l.path), op, "'", l.path,
                "' has a LoRA adapter that the config's targets do not name");

  const std::string weights = encode_safetensors(tensors, {{"format", "pt"}});
  const std::string config_text = config_to_json(config).dump(2) + "\n";
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  XGRAD_CHECK(std::filesystem::is_directory(dir), op, "cannot make the folder (",
              error ? error.message() : "a file has that name", ")");
  // Both written whole before either is renamed into place, the config last, signals held
  // off meanwhile: new adapters never sit beside an old config (another scale).
  AtomicFileWriter weights_out(join_path(dir, kAdapterWeightsFile), op),
      config_out(join_path(dir, kAdapterConfigFile), op);
  weights_out.write(weights);
  weights_out.finish();
  config_out.write(config_text);
  config_out.finish();
  const SignalsDeferred held;
  // The old config first: a folder without one loads as no adapters, never as a mix.
  const std::string config_path = join_path(dir, kAdapterConfigFile);
  if (std::filesystem::is_regular_file(std::filesystem::symlink_status(config_path, error))) {
    std::filesystem::remove(config_path, error);
    XGRAD_CHECK(!error, op, "cannot remove the old ", kAdapterConfigFile, " (", error.message(), ")");
  }
  weights_out.commit();
  config_out.commit();
}

LoRAConfig read_adapter_config(const std::string& path) {
  const std::string op = "adapter config '" + path + "'";
  const std::string text = read_regular_file(path, op);
  json fields;
  try {
    fields = json::parse(text);
  } catch (const json::exception& e) {
    fail(op, "is not valid JSON (", e.what(), ")");
  }
  return config_from_json(fields, op);
}

LoRAConfig load_adapter(const std::string& dir, Module& model) {
  const std::string config_path = join_path(dir, kAdapterConfigFile),
                    weights_path = join_path(dir, kAdapterWeightsFile);
  const LoRAConfig config = read_adapter_config(config_path);
  const SafetensorsContents contents = read_safetensors(weights_path);
  // The targets are the config's; the tensors, the weights file's.
  const std::vector<NamedLinear> targets = adaptable_targets(model, config, "adapter config '" + config_path + "'");
  check_adapter_tensors(contents, expected_shapes(targets, config.r), "load_adapter '" + weights_path + "'");

  NoGradGuard no_grad;
  for (const NamedLinear& t : targets) {
    t.linear->add_lora(config.options());
    Tensor a = t.linear->lora_A->weight, b = t.linear->lora_B->weight;
    a.set_data(contents.tensors.at(key_of(t.path, "lora_A")).to(a.dtype()));
    b.set_data(contents.tensors.at(key_of(t.path, "lora_B")).to(b.dtype()));
  }
  freeze_all_but_lora(model);
  return config;
}

}  // namespace xgrad::nn
