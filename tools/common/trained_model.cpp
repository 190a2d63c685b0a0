#include "trained_model.hpp"

#include <algorithm>
#include <set>

#include "finite.hpp"
#include "language_model.hpp"
#include "text.hpp"
#include "xgrad/nn/checkpoint.hpp"
#include "xgrad/nn/init.hpp"

namespace tools {

using namespace xgrad;

std::vector<std::int64_t> ModelTokens::encode(const std::string& text) const {
  if (!tokenizer) return tools::encode(bytes, text);
  const std::vector<text::TokenId> ids = tokenizer->tokenizer.encode(text, text::AllowedSpecial::all());
  return {ids.begin(), ids.end()};
}

std::size_t ModelTokens::size() const { return tokenizer ? tokenizer->tokenizer.vocabulary_size() : bytes.size(); }

std::string ModelTokens::decode(std::int64_t token) const {
  XGRAD_CHECK(token >= 0 && static_cast<std::size_t>(token) < size(), "decode", "token ", token,
              " is outside the vocabulary of ", size(), " ", unit());
  if (!tokenizer) return std::string(1, static_cast<char>(bytes[static_cast<std::size_t>(token)]));
  return std::string(tokenizer->tokenizer.token_bytes(static_cast<text::TokenId>(token)));
}

std::string ModelTokens::default_prompt() const {
  if (tokenizer) return tokenizer->tokenizer.find_special("<|endoftext|>") ? "<|endoftext|>" : "\n";
  return std::find(bytes.begin(), bytes.end(), '\n') != bytes.end() ? "\n" : std::string(1, bytes.front());
}

namespace {

// The model's settings in the checkpoint must describe the tensors it holds before a
// model is built from them: a damaged or forged "config.layers = 200000" would build a
// model far larger than the file (or the machine).
void check_settings_fit_tensors(const nn::SafetensorsContents& contents, const Config& c, const Flag& what,
                                const std::string& path) {
  const auto size = [](int v) { return static_cast<std::size_t>(v); };
  const auto expect = [&](const std::string& name, const xgrad::Shape& shape, const std::string& settings) {
    const auto it = contents.tensors.find(name);
    if (it == contents.tensors.end() || it->second.shape() != shape)
      throw UsageError(str(what, " ", path, ": its settings (", settings, ") call for ", name, " of ", shape_str(shape),
                           ", but it holds ", it == contents.tensors.end() ? "none" : shape_str(it->second.shape())));
  };
  const Settings<Config>& train = settings_of<Config>();
  const std::string vocab = train.key(&Config::vocab), width = train.key(&Config::d_model),
                    window = train.key(&Config::seq_len);
  expect("wte.weight", {size(c.vocab), size(c.d_model)}, vocab + ", " + width);
  expect("wpe.weight", {size(c.seq_len), size(c.d_model)}, window + ", " + width);
  std::set<std::string> blocks;  // "0", "1", ... of the names "h.0.ln_1.weight", ...
  for (const auto& [name, tensor] : contents.tensors)
    if (name.rfind("h.", 0) == 0) blocks.insert(name.substr(2, name.find('.', 2) - 2));
  if (blocks.size() != size(c.layers))
    throw UsageError(str(what, " ", path, ": its ", train.key(&Config::layers), " = ", c.layers,
                         " but it holds the tensors of ", blocks.size(), " layer", blocks.size() == 1 ? "" : "s"));
}

// The model's tokens from its checkpoint: the tokenizer kept whole, or the bytes.
ModelTokens read_tokens(const nn::SafetensorsContents& contents, const Config& c, const std::string& source) {
  ModelTokens tokens;
  tokens.tokenizer = tokenizer_from_metadata(contents.metadata, source);
  if (tokens.tokenizer) {
    if (tokens.tokenizer->tokenizer.vocabulary_size() != static_cast<std::size_t>(c.vocab))
      throw UsageError(str(source, ": its tokenizer has ", tokens.tokenizer->tokenizer.vocabulary_size(),
                           " tokens but its model ", c.vocab));
    return tokens;
  }
  const auto hex = contents.metadata.find("lm.vocabulary");
  const std::optional<std::vector<std::uint8_t>> bytes =
      hex == contents.metadata.end() ? std::nullopt : vocabulary_from_hex(hex->second);
  if (!bytes || bytes->size() != static_cast<std::size_t>(c.vocab))
    throw UsageError(str(source, ": its lm.vocabulary is missing or damaged"));
  tokens.bytes = *bytes;
  return tokens;
}

// A published model's config must describe the tensors the checkpoint holds before the
// model is built, as check_settings_fit_tensors does for xgrad's GPT.
void check_config_fits_tensors(const nn::SafetensorsContents& contents, const models::ModelConfig& config,
                               const Flag& what, const std::string& path) {
  const auto expected = [&] {
    if (const auto* g = std::get_if<models::GPT2Config>(&config))
      return std::pair<std::string, xgrad::Shape>{"transformer.wte.weight", {g->vocab_size, g->n_embd}};
    const auto& l = std::get<models::LlamaConfig>(config);
    return std::pair<std::string, xgrad::Shape>{"model.embed_tokens.weight", {l.vocab_size, l.hidden_size}};
  }();
  const auto it = contents.tensors.find(expected.first);
  if (it == contents.tensors.end() || it->second.shape() != expected.second)
    throw UsageError(str(what, " ", path, ": its ", kModelConfigKey, " calls for ", expected.first, " of ",
                         shape_str(expected.second), ", but it holds ",
                         it == contents.tensors.end() ? "none" : shape_str(it->second.shape())));
}

}  // namespace

TrainedModel load_trained_model(const Flag& what, const std::string& path) {
  const std::string source = str(what, " ", path);
  check_input_exists(what.dashed(), path);
  const nn::SafetensorsContents contents = nn::read_safetensors(path);
  Config c = settings_of<Config>().defaults();
  try {
    apply_metadata(contents.metadata, c, {});  // the learning settings too: --lora adds tensors
  } catch (const UsageError& e) {
    throw UsageError(str(source, ": ", e.what()));
  }
  if (!c.language_model())
    throw UsageError(str(source, ": a model of ", flag(&Config::task), " ", c.task,
                         ", not a language model (train one with xgrad-train ", flag(&Config::task), " lm)"));
  validate_read(c, contents.metadata, {}, source);  // as xgrad-train checks its flags
  TrainedModel trained{.model = nullptr, .tokens = read_tokens(contents, c, source), .config = c};
  std::unique_ptr<models::CausalLM>& model = trained.model;
  const nn::init::SkipInit skip;  // every parameter comes from the checkpoint
  if (c.published_model()) {
    const models::ModelConfig config = recorded_model_config(contents.metadata, source);
    check_config_fits_tensors(contents, config, what, path);
    model = make_language_model(c, static_cast<std::size_t>(c.vocab), &contents.metadata);
  } else {
    check_settings_fit_tensors(contents, c, what, path);
    model = make_language_model(c, static_cast<std::size_t>(c.vocab), nullptr);
  }
  nn::load(contents, *model, nullptr, path);
  if (const std::optional<std::string> bad = first_nonfinite(*model))
    throw UsageError(str(source, ": the tensor ", *bad, " holds NaN or infinite values"));
  return trained;
}

}  // namespace tools
