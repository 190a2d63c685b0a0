// xgrad-generate: continues a prompt with a language model trained by
// `xgrad-train --task lm` (on a text's bytes, or on token shards: then with the tokenizer
// its checkpoint keeps). The prompt and its continuation go to stdout as they are written,
// the speed to stderr.
//
//   xgrad-generate --checkpoint kjv.safetensors --prompt "And God said" --tokens 500

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "cli.hpp"
#include "config.hpp"
#include "finite.hpp"
#include "flags.hpp"
#include "gpt.hpp"
#include "language_model.hpp"
#include "text.hpp"
#include "tokenizer_files.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/autograd/precision.hpp"
#include "xgrad/nn/checkpoint.hpp"

using namespace xgrad;
using tools::Config;
using tools::flag;

namespace {

struct GenerateOptions {
  std::string checkpoint, prompt;
  std::size_t tokens = 0, top_k = 0;
  double temperature = 0;
  std::uint64_t seed = 0;
  bool no_cache = false;
  int threads = 0;
  std::string precision;
};

// xgrad-generate's table: one row per flag (tools/common/settings.hpp).
tools::Settings<GenerateOptions> settings_table(std::type_identity<GenerateOptions>) {
  using namespace tools::setting;
  return {"xgrad-generate",
          Text::of("continues a prompt with a language model trained by xgrad-train ", &Config::task,
                   " lm.\nExample: xgrad-generate ", &GenerateOptions::checkpoint, " kjv.safetensors ",
                   &GenerateOptions::prompt, " \"And God said\" ", &GenerateOptions::tokens, " 500"),
          {
              path(&GenerateOptions::checkpoint, "checkpoint")
                  .help("a checkpoint written by xgrad-train ", &Config::task, " lm")
                  .required(),
              tools::setting::text(&GenerateOptions::prompt, "prompt")
                  .help("the text to continue (a model of a text's bytes: bytes of its vocabulary; a model of "
                        "tokens: any text, <|endoftext|> its special token)")
                  .fallback([](const GenerateOptions&) { return std::string("\n"); },
                            "a model of tokens: <|endoftext|>; of bytes: a line break, or the vocabulary's first "
                            "byte when the text had none"),
              whole(&GenerateOptions::tokens, "tokens")
                  .help("tokens to generate (bytes, for a model of a text's bytes)")
                  .fallback(500),
              real(&GenerateOptions::temperature, "temperature")
                  .help("divides the logits; 0 takes the most likely token (greedy)")
                  .at_least(0)
                  .fallback(0.8),
              whole(&GenerateOptions::top_k, "top-k")
                  .help("draw among the k most likely tokens only (0: all)")
                  .fallback(200),
              bind(&GenerateOptions::seed, flags::seed())
                  .help("seed of the draws: the same seed gives the same text")
                  .fallback(0),
              toggle(&GenerateOptions::no_cache, "no-cache")
                  .help("recompute the whole window for every token (the same text, slower)"),
              bind(&GenerateOptions::threads, flags::threads()).fallback(0),
              bind(&GenerateOptions::precision, flags::precision()).fallback("float32"),
          }};
}

// The model's settings in the checkpoint must describe the tensors it holds before a
// model is built from them: a damaged or forged "config.layers = 200000" would build a
// model far larger than the file (or the machine).
void check_settings_fit_tensors(const nn::SafetensorsContents& contents, const tools::Config& c,
                                const std::string& path) {
  const auto size = [](int v) { return static_cast<std::size_t>(v); };
  const auto expect = [&](const std::string& name, const Shape& shape, const std::string& settings) {
    const auto it = contents.tensors.find(name);
    if (it == contents.tensors.end() || it->second.shape() != shape)
      throw tools::UsageError(str(flag(&GenerateOptions::checkpoint), " ", path, ": its settings (", settings,
                                  ") call for ", name, " of ", shape_str(shape), ", but it holds ",
                                  it == contents.tensors.end() ? "none" : shape_str(it->second.shape())));
  };
  const tools::Settings<Config>& train = tools::settings_of<Config>();
  const std::string vocab = train.key(&Config::vocab), width = train.key(&Config::d_model),
                    window = train.key(&Config::seq_len);
  expect("wte.weight", {size(c.vocab), size(c.d_model)}, vocab + ", " + width);
  expect("wpe.weight", {size(c.seq_len), size(c.d_model)}, window + ", " + width);
  std::set<std::string> blocks;  // "0", "1", ... of the names "h.0.ln_1.weight", ...
  for (const auto& [name, tensor] : contents.tensors)
    if (name.rfind("h.", 0) == 0) blocks.insert(name.substr(2, name.find('.', 2) - 2));
  if (blocks.size() != size(c.layers))
    throw tools::UsageError(str(flag(&GenerateOptions::checkpoint), " ", path, ": its ", train.key(&Config::layers),
                                " = ", c.layers, " but it holds the tensors of ", blocks.size(), " layer",
                                blocks.size() == 1 ? "" : "s"));
}

// What a model's tokens are: the bytes of its text's vocabulary (the char recipe), or a
// tokenizer's tokens (a model of token shards), as its checkpoint records them.
struct ModelTokens {
  std::vector<std::uint8_t> bytes;
  std::optional<tools::NamedTokenizer> tokenizer;

  std::vector<std::int64_t> encode(const std::string& text) const {
    if (!tokenizer) return tools::encode(bytes, text);
    const std::vector<xgrad::text::TokenId> ids = tokenizer->tokenizer.encode(text, xgrad::text::AllowedSpecial::all());
    return {ids.begin(), ids.end()};
  }
  std::string decode(std::int64_t token) const {
    if (!tokenizer) return std::string(1, static_cast<char>(bytes[static_cast<std::size_t>(token)]));
    return std::string(tokenizer->tokenizer.token_bytes(static_cast<xgrad::text::TokenId>(token)));
  }
  // As xgrad-train's samples begin: the end of a text, or the start of a line.
  std::string default_prompt() const {
    if (tokenizer) return tokenizer->tokenizer.find_special("<|endoftext|>") ? "<|endoftext|>" : "\n";
    return std::find(bytes.begin(), bytes.end(), '\n') != bytes.end() ? "\n" : std::string(1, bytes.front());
  }
  const char* unit() const { return tokenizer ? "tokens" : "bytes"; }
};

// The model's tokens from its checkpoint: the tokenizer kept whole, or the bytes.
ModelTokens read_tokens(const nn::SafetensorsContents& contents, const tools::Config& c, const std::string& source) {
  ModelTokens tokens;
  tokens.tokenizer = tools::tokenizer_from_metadata(contents.metadata, source);
  if (tokens.tokenizer) {
    if (tokens.tokenizer->tokenizer.vocabulary_size() != static_cast<std::size_t>(c.vocab))
      throw tools::UsageError(str(source, ": its tokenizer has ", tokens.tokenizer->tokenizer.vocabulary_size(),
                                  " tokens but its model ", c.vocab));
    return tokens;
  }
  const auto hex = contents.metadata.find("lm.vocabulary");
  const std::optional<std::vector<std::uint8_t>> bytes =
      hex == contents.metadata.end() ? std::nullopt : tools::vocabulary_from_hex(hex->second);
  if (!bytes || bytes->size() != static_cast<std::size_t>(c.vocab))
    throw tools::UsageError(str(source, ": its lm.vocabulary is missing or damaged"));
  tokens.bytes = *bytes;
  return tokens;
}

// A published model's config must describe the tensors the checkpoint holds before the
// model is built, as check_settings_fit_tensors does for xgrad's GPT.
void check_config_fits_tensors(const nn::SafetensorsContents& contents, const models::ModelConfig& config,
                               const std::string& path) {
  const auto expected = [&] {
    if (const auto* g = std::get_if<models::GPT2Config>(&config))
      return std::pair<std::string, Shape>{"transformer.wte.weight", {g->vocab_size, g->n_embd}};
    const auto& l = std::get<models::LlamaConfig>(config);
    return std::pair<std::string, Shape>{"model.embed_tokens.weight", {l.vocab_size, l.hidden_size}};
  }();
  const auto it = contents.tensors.find(expected.first);
  if (it == contents.tensors.end() || it->second.shape() != expected.second)
    throw tools::UsageError(str(flag(&GenerateOptions::checkpoint), " ", path, ": its ", tools::kModelConfigKey,
                                " calls for ", expected.first, " of ", shape_str(expected.second), ", but it holds ",
                                it == contents.tensors.end() ? "none" : shape_str(it->second.shape())));
}

// The model a checkpoint of `xgrad-train --task lm` describes, with its weights, and its
// tokens.
std::unique_ptr<models::CausalLM> load_model(const std::string& path, ModelTokens& tokens) {
  const std::string source = str(flag(&GenerateOptions::checkpoint), " ", path);
  tools::check_input_exists(flag(&GenerateOptions::checkpoint).dashed(), path);
  const nn::SafetensorsContents contents = nn::read_safetensors(path);
  Config c = tools::settings_of<Config>().defaults();
  try {
    tools::apply_metadata(contents.metadata, c, {});  // the learning settings too: --lora adds tensors
  } catch (const tools::UsageError& e) {
    throw tools::UsageError(str(source, ": ", e.what()));
  }
  if (!c.language_model())
    throw tools::UsageError(str(source, ": a model of ", flag(&Config::task), " ", c.task,
                                ", not a language model (train one with xgrad-train ", flag(&Config::task), " lm)"));
  tools::validate_read(c, contents.metadata, {}, source);  // as xgrad-train checks its flags
  tokens = read_tokens(contents, c, source);
  std::unique_ptr<models::CausalLM> model;
  if (c.published_model()) {
    const models::ModelConfig config = tools::recorded_model_config(contents.metadata, source);
    check_config_fits_tensors(contents, config, path);
    model = tools::make_language_model(c, static_cast<std::size_t>(c.vocab), &contents.metadata);
  } else {
    check_settings_fit_tensors(contents, c, path);
    model = tools::make_language_model(c, static_cast<std::size_t>(c.vocab), nullptr);
  }
  nn::load(contents, *model, nullptr, path);
  if (const std::optional<std::string> bad = tools::first_nonfinite(*model))
    throw tools::UsageError(str(source, ": the tensor ", *bad, " holds NaN or infinite values"));
  return model;
}

int run(int argc, char** argv) {
  GenerateOptions o;
  tools::Given given;
  if (const std::optional<int> printed = tools::settings_of<GenerateOptions>().parse(argc, argv, o, given))
    return *printed;
  tools::settings_of<GenerateOptions>().check(o);
  if (o.prompt.empty()) throw tools::SettingError(flag(&GenerateOptions::prompt), " must hold at least one byte");
  if (o.threads > 0) set_num_threads(o.threads);

  ModelTokens tokens;
  std::unique_ptr<models::CausalLM> model = load_model(o.checkpoint, tokens);
  if (!tools::settings_of<GenerateOptions>().was_given(given, &GenerateOptions::prompt))
    o.prompt = tokens.default_prompt();
  std::vector<std::int64_t> prompt;
  try {
    prompt = tokens.encode(o.prompt);
  } catch (const Error& e) {
    throw tools::UsageError(str(flag(&GenerateOptions::prompt), ": ", e.what()));
  }
  std::fwrite(o.prompt.data(), 1, o.prompt.size(), stdout);
  tools::check_stdout();
  Generator gen(o.seed);
  const AutocastGuard precision(o.precision == "bf16" ? Precision::bfloat16 : Precision::float32);
  const auto started = std::chrono::steady_clock::now();
  tools::generate(*model, prompt, o.tokens, {.temperature = o.temperature, .top_k = o.top_k, .use_cache = !o.no_cache},
                  gen, [&](std::int64_t token) {
                    const std::string bytes = tokens.decode(token);
                    std::fwrite(bytes.data(), 1, bytes.size(), stdout);
                    tools::check_stdout();
                  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::putchar('\n');
  tools::check_stdout();
  std::fprintf(stderr, "xgrad-generate: %zu %s in %.2f s, %.0f %s/s (%s)\n", o.tokens, tokens.unit(), seconds,
               static_cast<double>(o.tokens) / std::max(seconds, 1e-9), tokens.unit(),
               o.no_cache ? "no cache" : "key/value cache");
  return 0;
}

}  // namespace

// Every error is one line on stderr and exit status 2.
int main(int argc, char** argv) {
  return tools::run_tool("xgrad-generate", [&] { return run(argc, argv); });
}
