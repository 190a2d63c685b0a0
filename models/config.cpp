#include "xgrad/models/config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numbers>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/files.hpp"
#include "xgrad/autograd/memory.hpp"
#include "xgrad/autograd/ops.hpp"
#include "xgrad/text/tokenizer.hpp"

namespace xgrad::models {

namespace {

using json = nlohmann::json;

constexpr const char* kTextBytesField = "xgrad_text_bytes";  // TokenIdFields::text_bytes

// One config.json being read: typed access to its fields, with errors naming the file
// and the field.
class Fields {
 public:
  Fields(const json& object, std::string source, std::string prefix = "")
      : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

  // An object inside this one (rope_scaling's), its fields named "rope_scaling.factor".
  Fields nested(const char* name) const {
    const json& value = object_.at(name);
    XGRAD_CHECK(value.is_object(), source_, "field \"", prefix_, name, "\" must be an object, not ", value.dump());
    return Fields(value, source_, prefix_ + name + ".");
  }

  // A required size; absent, null, negative or not an integer is an error.
  std::size_t size(const char* name) const {
    XGRAD_CHECK(has(name), source_, "field \"", prefix_, name, "\" is missing");
    return size_or(name, 0);
  }
  std::size_t size_or(const char* name, std::size_t fallback) const {
    if (!has(name)) return fallback;
    const json& value = object_.at(name);
    XGRAD_CHECK(value.is_number_unsigned() || (value.is_number_integer() && value.get<std::int64_t>() >= 0), source_,
                "field \"", prefix_, name, "\" must be a non-negative integer, not ", value.dump());
    return value.get<std::size_t>();
  }
  double number(const char* name) const {
    XGRAD_CHECK(has(name), source_, "field \"", prefix_, name, "\" is missing");
    return number_or(name, 0);
  }
  double number_or(const char* name, double fallback) const {
    if (!has(name)) return fallback;
    const json& value = object_.at(name);
    XGRAD_CHECK(value.is_number() && std::isfinite(value.get<double>()), source_, "field \"", prefix_, name,
                "\" must be a finite number, not ", value.dump());
    return value.get<double>();
  }
  bool flag_or(const char* name, bool fallback) const {
    if (!has(name)) return fallback;
    const json& value = object_.at(name);
    XGRAD_CHECK(value.is_boolean(), source_, "field \"", prefix_, name, "\" must be true or false, not ", value.dump());
    return value.get<bool>();
  }
  std::string text_or(const char* name, const std::string& fallback) const {
    if (!has(name)) return fallback;
    const json& value = object_.at(name);
    XGRAD_CHECK(value.is_string(), source_, "field \"", prefix_, name, "\" must be a string, not ", value.dump());
    return value.get<std::string>();
  }
  // A field naming a feature xgrad does not implement: absent, null or `off` only.
  void unsupported_unless(const char* name, const json& off, const char* why) const {
    if (!has(name) || object_.at(name) == off) return;
    fail(source_, "field \"", prefix_, name, "\" is ", object_.at(name).dump(), ": ", why);
  }
  // Members that are objects themselves (a nesting xgrad does not read), refused.
  void refuse_objects(const char* why) const {
    for (const auto& [name, value] : object_.items())
      XGRAD_CHECK(!value.is_object(), source_, "field \"", prefix_, name, "\" is ", value.dump(), ": ", why);
  }
  // A token id field as its JSON text (null, an id, or a list of ids); empty when absent.
  std::string token_id_text(const char* name) const {
    if (!present(name)) return {};
    const json& value = object_.at(name);
    const auto id = [](const json& v) {
      return v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0);
    };
    const bool ids = value.is_array() && std::all_of(value.begin(), value.end(), id);
    XGRAD_CHECK(value.is_null() || id(value) || ids, source_, "field \"", prefix_, name,
                "\" must be a token id, a list ", "of them or null, not ", value.dump());
    return value.dump();
  }
  // A list of distinct bytes in increasing order (xgrad_text_bytes); empty when absent.
  std::vector<std::uint8_t> increasing_bytes(const char* name) const {
    if (!has(name)) return {};
    const json& value = object_.at(name);
    std::vector<std::uint8_t> bytes;
    const bool list = value.is_array() && !value.empty() && std::all_of(value.begin(), value.end(), [&](const json& v) {
                        if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > 255)
                          return false;
                        const auto byte = static_cast<std::uint8_t>(v.get<std::int64_t>());
                        if (!bytes.empty() && byte <= bytes.back()) return false;
                        bytes.push_back(byte);
                        return true;
                      });
    XGRAD_CHECK(list, source_, "field \"", prefix_, name,
                "\" must be a list of bytes (0 to 255) in increasing order, not ", value.dump());
    return bytes;
  }
  bool has(const char* name) const { return object_.contains(name) && !object_.at(name).is_null(); }
  bool present(const char* name) const { return object_.contains(name); }  // null included
  const std::string& source() const { return source_; }

 private:
  const json& object_;
  std::string source_;
  std::string prefix_;
};

TokenIdFields parse_token_ids(const Fields& f) {
  return {f.token_id_text("bos_token_id"), f.token_id_text("eos_token_id"), f.token_id_text("pad_token_id"),
          f.increasing_bytes(kTextBytesField)};
}

GPT2Config parse_gpt2(const Fields& f) {
  GPT2Config c;
  c.token_ids = parse_token_ids(f);
  c.vocab_size = f.size("vocab_size");
  c.n_positions = f.size("n_positions");
  c.n_embd = f.size("n_embd");
  c.n_layer = f.size("n_layer");
  c.n_head = f.size("n_head");
  c.n_inner = f.size_or("n_inner", 0);
  XGRAD_CHECK(!f.has("n_inner") || c.n_inner > 0, f.source(), "field \"n_inner\" must be positive (null: 4 x n_embd)");
  c.layer_norm_epsilon = f.number_or("layer_norm_epsilon", c.layer_norm_epsilon);
  c.activation_function = f.text_or("activation_function", c.activation_function);
  c.embd_pdrop = f.number_or("embd_pdrop", c.embd_pdrop);
  c.attn_pdrop = f.number_or("attn_pdrop", c.attn_pdrop);
  c.resid_pdrop = f.number_or("resid_pdrop", c.resid_pdrop);
  c.initializer_range = f.number_or("initializer_range", c.initializer_range);
  c.tie_word_embeddings = f.flag_or("tie_word_embeddings", c.tie_word_embeddings);
  f.unsupported_unless("scale_attn_weights", true, "xgrad scales attention by 1 / sqrt(head width), as GPT-2 does");
  f.unsupported_unless("scale_attn_by_inverse_layer_idx", false, "xgrad does not scale attention by layer");
  f.unsupported_unless("add_cross_attention", false, "xgrad's GPT2 is decoder-only");
  return c;
}

// A RoPE scaling's values in range; `where` names the object they came from in errors.
void check_rope_scaling(const RopeScaling& s, const std::string& source, const std::string& where) {
  const std::string& type = s.rope_type;
  XGRAD_CHECK(type == "default" || type == "linear" || type == "llama3", source, "field \"", where,
              ".rope_type\" is \"", type,
              "\", a RoPE scaling xgrad does not implement: it has \"default\", \"linear\" and \"llama3\" "
              "(\"dynamic\" depends on each call's length; \"yarn\" and \"longrope\" scale attention too)");
  if (type == "default") return;
  // The frequencies are divided by it: the first, 1, must stay a float32.
  constexpr double kSmallestFactor = 1.0 / std::numeric_limits<float>::max();
  XGRAD_CHECK(std::isfinite(s.factor) && s.factor >= kSmallestFactor, source, "field \"", where, ".factor\" is ",
              s.factor, ": it must be finite and at least ", kSmallestFactor,
              " (the frequencies are divided by it, in float32)");
  if (type != "llama3") return;
  XGRAD_CHECK(std::isfinite(s.low_freq_factor) && s.low_freq_factor > 0, source, "field \"", where,
              ".low_freq_factor\" is ", s.low_freq_factor, ": it must be finite and > 0");
  XGRAD_CHECK(std::isfinite(s.high_freq_factor) && s.high_freq_factor > s.low_freq_factor, source, "field \"", where,
              ".high_freq_factor\" is ", s.high_freq_factor, ": it must be finite and above low_freq_factor ",
              s.low_freq_factor);
  XGRAD_CHECK(s.original_max_position_embeddings > 0, source, "field \"", where,
              ".original_max_position_embeddings\" must be positive");
}

struct RopeSettings {
  double theta;
  RopeScaling scaling;
};

// One object of RoPE settings, `name` in the top-level fields `top`: rope_scaling
// (transformers 4.x) or rope_parameters (5.x). transformers 5 reads either as the other, so
// both are read alike: the type ("type" before 4.43) and the fields it uses, rope_theta
// and partial_rotary_factor inside, each agreeing with a top-level one; other fields are
// passed over, as transformers does.
RopeSettings parse_rope_object(const Fields& top, const char* name, double top_theta) {
  const Fields o = top.nested(name);
  o.refuse_objects("RoPE by the layer's type is not Llama's");
  o.unsupported_unless("partial_rotary_factor", 1, "a Llama turns every column of its heads");
  RopeSettings r{o.number_or("rope_theta", top_theta), {}};
  XGRAD_CHECK(!top.has("rope_theta") || r.theta == top_theta, top.source(), "field \"", name, ".rope_theta\" is ",
              json(r.theta).dump(), " but field \"rope_theta\" is ", json(top_theta).dump());
  // A factor without a type: transformers 4 refuses it, 5 takes plain RoPE.
  const char* type_field = o.has("rope_type") || !o.has("type") ? "rope_type" : "type";
  XGRAD_CHECK(o.has(type_field) || !o.has("factor"), top.source(), "field \"", name,
              "\" has a factor but no \"rope_type\"");
  RopeScaling& s = r.scaling;
  s.rope_type = o.text_or(type_field, s.rope_type);
  if (s.rope_type == "linear" || s.rope_type == "llama3") s.factor = o.number("factor");
  if (s.rope_type == "llama3") {
    s.low_freq_factor = o.number("low_freq_factor");
    s.high_freq_factor = o.number("high_freq_factor");
    // transformers 5 moves a top-level original_max_position_embeddings inside.
    const char* original = "original_max_position_embeddings";
    XGRAD_CHECK(o.has(original) || top.has(original), top.source(), "field \"", name, ".", original, "\" is missing");
    s.original_max_position_embeddings = o.has(original) ? o.size(original) : top.size(original);
    XGRAD_CHECK(!o.has(original) || !top.has(original) || top.size(original) == s.original_max_position_embeddings,
                top.source(), "field \"", name, ".", original, "\" is ", s.original_max_position_embeddings,
                " but field \"", original, "\" is ", top.size_or(original, 0));
  }
  check_rope_scaling(s, top.source(), name);
  return r;
}

// RoPE's fields: transformers 4.x's rope_theta and rope_scaling, 5.x's rope_parameters
// (rope_theta inside). A file holding both must say the same in each.
void parse_rope(const Fields& f, LlamaConfig& c) {
  c.rope_theta = f.number_or("rope_theta", c.rope_theta);
  f.unsupported_unless("partial_rotary_factor", 1, "a Llama turns every column of its heads");
  std::optional<RopeSettings> v4, v5;
  if (f.has("rope_scaling")) v4 = parse_rope_object(f, "rope_scaling", c.rope_theta);
  if (f.has("rope_parameters")) v5 = parse_rope_object(f, "rope_parameters", c.rope_theta);
  XGRAD_CHECK(!v4 || !v5 || (v4->theta == v5->theta && v4->scaling == v5->scaling), f.source(),
              "fields \"rope_parameters\" and \"rope_scaling\" set RoPE differently");
  if (const auto& chosen = v5 ? v5 : v4) {
    c.rope_theta = chosen->theta;
    c.rope_scaling = chosen->scaling;
  }
}

// Llama's fields, and for "mistral" its sliding window. transformers' MistralConfig differs
// from LlamaConfig in its defaults: a window of 4096 when the field is absent (null: none),
// 8 K/V heads when absent (null: num_attention_heads) and 131072 positions.
LlamaConfig parse_llama(const Fields& f, const std::string& type) {
  LlamaConfig c;
  c.model_type = type;
  c.token_ids = parse_token_ids(f);
  if (type == "mistral") {
    c.max_position_embeddings = 4096 * 32;
    c.sliding_window = f.present("sliding_window") ? f.size_or("sliding_window", 0) : 4096;
    XGRAD_CHECK(!f.has("sliding_window") || c.sliding_window > 0, f.source(),
                "field \"sliding_window\" must be positive (null: no window)");
  }
  c.vocab_size = f.size("vocab_size");
  c.hidden_size = f.size("hidden_size");
  c.intermediate_size = f.size("intermediate_size");
  c.num_hidden_layers = f.size("num_hidden_layers");
  c.num_attention_heads = f.size("num_attention_heads");
  c.num_key_value_heads =
      type == "mistral" && !f.present("num_key_value_heads") ? 8 : f.size_or("num_key_value_heads", 0);
  XGRAD_CHECK(!f.has("num_key_value_heads") || c.num_key_value_heads > 0, f.source(),
              "field \"num_key_value_heads\" must be positive (null: num_attention_heads)");
  XGRAD_CHECK(f.present("num_key_value_heads") || c.num_attention_heads % c.kv_heads() == 0, f.source(),
              "field \"num_key_value_heads\" is absent: its default, ", c.kv_heads(),
              " K/V heads (MistralConfig's), does not divide num_attention_heads ", c.num_attention_heads,
              " (give it)");
  c.max_position_embeddings = f.size_or("max_position_embeddings", c.max_position_embeddings);
  c.rms_norm_eps = f.number_or("rms_norm_eps", c.rms_norm_eps);
  parse_rope(f, c);
  c.attention_dropout = f.number_or("attention_dropout", c.attention_dropout);
  c.initializer_range = f.number_or("initializer_range", c.initializer_range);
  c.tie_word_embeddings = f.flag_or("tie_word_embeddings", c.tie_word_embeddings);
  const std::string act = f.text_or("hidden_act", "silu");
  XGRAD_CHECK(act == "silu", f.source(), "field \"hidden_act\" is \"", act, "\": Llama's MLP is SwiGLU (\"silu\")");
  f.unsupported_unless("attention_bias", false, "xgrad's Llama has no attention biases");
  f.unsupported_unless("mlp_bias", false, "xgrad's Llama has no MLP biases");
  f.unsupported_unless("pretraining_tp", 1, "tensor-parallel slicing is not implemented");
  c.head_dim = f.size_or("head_dim", 0);
  XGRAD_CHECK(!f.has("head_dim") || c.head_dim > 0, f.source(), "field \"head_dim\" must be positive");
  return c;
}

void check_dropout(double p, const char* name, const std::string& source) {
  XGRAD_CHECK(p >= 0.0 && p < 1.0, source, "field \"", name, "\" is ", p, ": dropout must be in [0, 1)");
}

void check_positive(std::size_t value, const char* name, const std::string& source) {
  XGRAD_CHECK(value > 0, source, "field \"", name, "\" must be positive");
}

// The standard deviation new weights are drawn with.
void check_initializer_range(double range, const std::string& source) {
  XGRAD_CHECK(range >= 0 && std::isfinite(range), source, "field \"initializer_range\" is ", range,
              ": a standard deviation must be finite and >= 0");
}

// A norm's epsilon, added in float32: positive there too (1e-60 would round to 0 and
// divide a zero row by zero).
void check_epsilon(double eps, const char* name, const std::string& source) {
  XGRAD_CHECK(eps > 0 && std::isfinite(eps) && static_cast<float>(eps) > 0.0f, source, "field \"", name, "\" is ", eps,
              ": it must be positive and finite in float32 (at least about 1.4e-45)");
}

}  // namespace

ModelSize model_size(const ModelConfig& config) {
  if (const auto* g = std::get_if<GPT2Config>(&config)) {
    const double d = static_cast<double>(g->n_embd), ff = static_cast<double>(g->inner());
    const double per_layer = 4 * d + (3 * d * d + 3 * d) + (d * d + d) + (d * ff + ff) + (ff * d + d);
    return {static_cast<double>(g->vocab_size + g->n_positions) * d + static_cast<double>(g->n_layer) * per_layer +
                2 * d + (g->tie_word_embeddings ? 0 : static_cast<double>(g->vocab_size) * d),
            4 + static_cast<double>(g->n_layer) * 12};
  }
  const auto& l = std::get<LlamaConfig>(config);
  const double d = static_cast<double>(l.hidden_size), ff = static_cast<double>(l.intermediate_size);
  const double width = static_cast<double>(l.head_width());  // in double: head_dim is any size a file gives
  const double q = static_cast<double>(l.num_attention_heads) * width, kv = static_cast<double>(l.kv_heads()) * width;
  const double per_layer = 2 * d + 2 * q * d + 2 * kv * d + 3 * d * ff;
  return {static_cast<double>(l.vocab_size) * d * (l.tie_word_embeddings ? 1 : 2) +
              static_cast<double>(l.num_hidden_layers) * per_layer + d,
          3 + static_cast<double>(l.num_hidden_layers) * 9};
}

namespace {

// A model this process cannot hold is refused before any of it is made (made layer by
// layer, a model of 10^8 small layers would grow until the kernel or a sanitizer ended
// the process). Each tensor costs its node and names too: about 1 KiB counted.
void check_fits(const ModelConfig& config, const std::string& source) {
  const ModelSize size = model_size(config);
  const double bytes = size.parameters * 4 + size.tensors * 1024;
  const auto usable = static_cast<double>(usable_memory_bytes());
  // Whole numbers while a double holds them exactly, else in scientific notation.
  const auto count = [](double x) {
    if (x < 0x1p53) return std::to_string(static_cast<std::uint64_t>(x));
    char about[32];  // past 2^53 a count is not exact anyway: "5.9e+20"
    std::snprintf(about, sizeof about, "%.2g", x);
    return std::string(about);
  };
  XGRAD_CHECK(bytes <= usable, source, "the model's ", count(size.parameters), " parameters in ", count(size.tensors),
              " tensors need about ", count(std::ceil(bytes / (1 << 20))), " MiB, more than the ",
              count(std::floor(usable / (1 << 20))), " MiB of memory this process can have");
}

// rope_scaling as transformers 4.x writes it (5.x reads it too): null when plain.
json rope_scaling_json(const RopeScaling& s) {
  if (s.rope_type == "default") return nullptr;
  json out = {{"rope_type", s.rope_type}, {"factor", s.factor}};
  if (s.rope_type == "llama3") {
    out["low_freq_factor"] = s.low_freq_factor;
    out["high_freq_factor"] = s.high_freq_factor;
    out["original_max_position_embeddings"] = s.original_max_position_embeddings;
  }
  return out;
}

}  // namespace

std::vector<double> scaled_rope_frequencies(const LlamaConfig& c) {
  std::vector<double> frequencies = rope_frequencies(c.rope_theta, c.head_width());
  const RopeScaling& s = c.rope_scaling;
  if (s.rope_type == "linear") {
    for (double& f : frequencies) f /= s.factor;
  } else if (s.rope_type == "llama3") {
    // Wavelengths (positions per turn) under the original context / high_freq_factor keep
    // their frequency, those over original / low_freq_factor are divided by factor, and
    // those between move from one to the other linearly in original / wavelength.
    const auto original = static_cast<double>(s.original_max_position_embeddings);
    for (double& f : frequencies) {
      const double wavelength = 2 * std::numbers::pi / f;
      if (wavelength < original / s.high_freq_factor) continue;
      if (wavelength > original / s.low_freq_factor) {
        f /= s.factor;
        continue;
      }
      const double smooth = (original / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f = (1 - smooth) * f / s.factor + smooth * f;
    }
  }
  return frequencies;
}

std::string model_type(const ModelConfig& config) {
  if (const auto* l = std::get_if<LlamaConfig>(&config)) return l->model_type;
  return "gpt2";
}

std::string model_family(const ModelConfig& config) {
  return std::holds_alternative<GPT2Config>(config) ? "gpt2" : "llama";
}

void check_config(const ModelConfig& config, const std::string& source) {
  std::visit(
      [&](const auto& c) {
        XGRAD_CHECK(c.token_ids.text_bytes.size() <= c.vocab_size, source, "field \"", kTextBytesField, "\" holds ",
                    c.token_ids.text_bytes.size(), " bytes, more than vocab_size ", c.vocab_size);
      },
      config);
  if (const auto* g = std::get_if<GPT2Config>(&config)) {
    check_positive(g->vocab_size, "vocab_size", source);
    check_positive(g->n_positions, "n_positions", source);
    check_positive(g->n_embd, "n_embd", source);
    check_positive(g->n_layer, "n_layer", source);
    check_positive(g->n_head, "n_head", source);
    XGRAD_CHECK(g->n_embd % g->n_head == 0, source, "field \"n_head\" is ", g->n_head,
                ", which does not divide n_embd ", g->n_embd);
    check_epsilon(g->layer_norm_epsilon, "layer_norm_epsilon", source);
    XGRAD_CHECK(g->activation_function == "gelu_new" || g->activation_function == "gelu_pytorch_tanh" ||
                    g->activation_function == "gelu" || g->activation_function == "relu",
                source, "field \"activation_function\" is \"", g->activation_function,
                "\": xgrad's GPT2 has gelu_new, gelu_pytorch_tanh, gelu and relu");
    check_dropout(g->embd_pdrop, "embd_pdrop", source);
    check_dropout(g->attn_pdrop, "attn_pdrop", source);
    check_dropout(g->resid_pdrop, "resid_pdrop", source);
    check_initializer_range(g->initializer_range, source);
    check_fits(config, source);
    return;
  }
  const auto& l = std::get<LlamaConfig>(config);
  XGRAD_CHECK(l.model_type == "llama" || l.model_type == "mistral", source, "model_type \"", l.model_type,
              "\" is not Llama's layout: \"llama\" or \"mistral\"");
  XGRAD_CHECK(l.model_type == "mistral" || l.sliding_window == 0, source, "a sliding window of ", l.sliding_window,
              " is Mistral's: model_type must be \"mistral\"");
  check_positive(l.vocab_size, "vocab_size", source);
  check_positive(l.hidden_size, "hidden_size", source);
  check_positive(l.intermediate_size, "intermediate_size", source);
  check_positive(l.num_hidden_layers, "num_hidden_layers", source);
  check_positive(l.num_attention_heads, "num_attention_heads", source);
  check_positive(l.max_position_embeddings, "max_position_embeddings", source);
  // Without head_dim, the heads split hidden_size; with it, q_proj is num_attention_heads
  // x head_dim wide whatever hidden_size is (transformers' LlamaConfig since 4.45).
  XGRAD_CHECK(l.head_dim || l.hidden_size % l.num_attention_heads == 0, source, "field \"num_attention_heads\" is ",
              l.num_attention_heads, ", which does not divide hidden_size ", l.hidden_size,
              " (and no head_dim is given)");
  XGRAD_CHECK(l.head_width() % 2 == 0, source, "the head width ",
              l.head_dim ? "head_dim" : "hidden_size / num_attention_heads", " = ", l.head_width(),
              " must be even for RoPE");
  XGRAD_CHECK(l.num_attention_heads % l.kv_heads() == 0, source, "field \"num_key_value_heads\" is ", l.kv_heads(),
              ", which does not divide num_attention_heads ", l.num_attention_heads);
  check_epsilon(l.rms_norm_eps, "rms_norm_eps", source);
  XGRAD_CHECK(l.rope_theta > 0, source, "field \"rope_theta\" must be positive");
  check_rope_scaling(l.rope_scaling, source, "rope_scaling");
  check_dropout(l.attention_dropout, "attention_dropout", source);
  check_initializer_range(l.initializer_range, source);
  check_fits(config, source);
}

ModelConfig parse_model_config(const std::string& json_text, const std::string& source) {
  json object;
  try {
    object = json::parse(json_text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number past double (1e400)
    fail(source, "not JSON (", e.what(), ")");
  }
  XGRAD_CHECK(object.is_object(), source, "must hold a JSON object");
  const Fields fields(object, source);
  XGRAD_CHECK(fields.has("model_type"), source, "field \"model_type\" is missing (\"gpt2\", \"llama\" or \"mistral\")");
  const std::string type = fields.text_or("model_type", "");
  ModelConfig config;
  if (type == "gpt2")
    config = parse_gpt2(fields);
  else if (type == "llama" || type == "mistral")
    config = parse_llama(fields, type);
  else
    fail(source, "field \"model_type\" is \"", type, "\": xgrad has \"gpt2\", \"llama\" and \"mistral\"");
  check_config(config, source);
  return config;
}

ModelConfig read_model_config(const std::string& path) {
  const std::string source = "model config '" + path + "'";
  return parse_model_config(read_regular_file(path, source), source);
}

std::string model_config_json(const ModelConfig& config, const ConfigJsonOptions& options) {
  json out;
  if (const auto* g = std::get_if<GPT2Config>(&config)) {
    out = {{"model_type", "gpt2"},
           {"architectures", {"GPT2LMHeadModel"}},
           {"vocab_size", g->vocab_size},
           {"n_positions", g->n_positions},
           {"n_ctx", g->n_positions},
           {"n_embd", g->n_embd},
           {"n_layer", g->n_layer},
           {"n_head", g->n_head},
           {"n_inner", g->n_inner ? json(g->n_inner) : json(nullptr)},
           {"layer_norm_epsilon", g->layer_norm_epsilon},
           {"activation_function", g->activation_function},
           {"embd_pdrop", g->embd_pdrop},
           {"attn_pdrop", g->attn_pdrop},
           {"resid_pdrop", g->resid_pdrop},
           {"initializer_range", g->initializer_range},
           {"tie_word_embeddings", g->tie_word_embeddings},
           {"scale_attn_weights", true},
           {"use_cache", true}};
  } else {
    const auto& l = std::get<LlamaConfig>(config);
    const bool mistral = l.model_type == "mistral";
    out = {{"model_type", l.model_type},
           {"architectures", {mistral ? "MistralForCausalLM" : "LlamaForCausalLM"}},
           {"vocab_size", l.vocab_size},
           {"hidden_size", l.hidden_size},
           {"intermediate_size", l.intermediate_size},
           {"num_hidden_layers", l.num_hidden_layers},
           {"num_attention_heads", l.num_attention_heads},
           {"num_key_value_heads", l.kv_heads()},
           {"head_dim", l.head_width()},
           {"max_position_embeddings", l.max_position_embeddings},
           {"rms_norm_eps", l.rms_norm_eps},
           {"rope_theta", l.rope_theta},
           {"rope_scaling", rope_scaling_json(l.rope_scaling)},
           {"attention_dropout", l.attention_dropout},
           {"attention_bias", false},
           {"mlp_bias", false},
           {"hidden_act", "silu"},
           {"initializer_range", l.initializer_range},
           {"tie_word_embeddings", l.tie_word_embeddings},
           {"use_cache", true}};
    if (mistral) out["sliding_window"] = l.sliding_window ? json(l.sliding_window) : json(nullptr);
  }
  const TokenIdFields& ids = std::visit([](const auto& c) -> const TokenIdFields& { return c.token_ids; }, config);
  const std::optional<text::TextBounds> bounds =
      options.tokenizer ? text::text_bounds(*options.tokenizer) : std::nullopt;
  const auto id_or = [&](const std::string& kept, auto from_tokenizer) {
    if (!kept.empty()) return json::parse(kept);
    return bounds ? json(from_tokenizer(*bounds)) : json(nullptr);
  };
  out["bos_token_id"] = id_or(ids.bos_token_id, [](const text::TextBounds& b) { return b.beginning; });
  out["eos_token_id"] = id_or(ids.eos_token_id, [](const text::TextBounds& b) { return b.end; });
  if (!ids.pad_token_id.empty()) out["pad_token_id"] = json::parse(ids.pad_token_id);
  if (!ids.text_bytes.empty())
    out[kTextBytesField] = ids.text_bytes;
  else if (options.text_bytes && !options.text_bytes->empty())
    out[kTextBytesField] = *options.text_bytes;
  out["torch_dtype"] = options.torch_dtype;
  return out.dump(2) + "\n";
}

}  // namespace xgrad::models
