// xgrad-generate: continues a prompt with a language model trained by
// `xgrad-train --task lm`. The prompt and its continuation go to stdout as they are
// written, the speed to stderr.
//
//   xgrad-generate --checkpoint kjv.safetensors --prompt "And God said" --tokens 500

#include <CLI/CLI.hpp>
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
#include "gpt.hpp"
#include "numbers.hpp"
#include "text.hpp"
#include "xgrad/autograd/blas.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/autograd/precision.hpp"
#include "xgrad/autograd/version.hpp"
#include "xgrad/nn/checkpoint.hpp"

using namespace xgrad;

namespace {

struct Options {
  std::string checkpoint, prompt = "\n";
  std::size_t tokens = 500, top_k = 200;
  double temperature = 0.8;
  std::uint64_t seed = 0;
  bool no_cache = false;
  int threads = 0;
  std::string precision = "float32";
};

// The model's settings in the checkpoint must describe the tensors it holds before a
// model is built from them: a damaged or forged "config.layers = 200000" would build a
// model far larger than the file (or the machine).
void check_settings_fit_tensors(const nn::SafetensorsContents& contents, const tools::Config& c,
                                const std::string& path) {
  const auto size = [](int v) { return static_cast<std::size_t>(v); };
  const auto expect = [&](const std::string& name, const Shape& shape, const char* settings) {
    const auto it = contents.tensors.find(name);
    if (it == contents.tensors.end() || it->second.shape() != shape)
      throw tools::UsageError(str("--checkpoint ", path, ": its settings (", settings, ") call for ", name, " of ",
                                  shape_str(shape), ", but it holds ",
                                  it == contents.tensors.end() ? "none" : shape_str(it->second.shape())));
  };
  expect("wte.weight", {size(c.vocab), size(c.d_model)}, "config.vocab, config.d-model");
  expect("wpe.weight", {size(c.seq_len), size(c.d_model)}, "config.seq-len, config.d-model");
  std::set<std::string> blocks;  // "0", "1", ... of the names "h.0.ln_1.weight", ...
  for (const auto& [name, tensor] : contents.tensors)
    if (name.rfind("h.", 0) == 0) blocks.insert(name.substr(2, name.find('.', 2) - 2));
  if (blocks.size() != size(c.layers))
    throw tools::UsageError(str("--checkpoint ", path, ": its config.layers = ", c.layers,
                                " but it holds the tensors of ", blocks.size(), " layer",
                                blocks.size() == 1 ? "" : "s"));
}

// The model a checkpoint of `xgrad-train --task lm` describes, with its weights, and its
// vocabulary.
std::unique_ptr<tools::GPT> load_model(const std::string& path, std::vector<std::uint8_t>& vocabulary) {
  tools::check_input_exists("--checkpoint", path);
  const nn::SafetensorsContents contents = nn::read_safetensors(path);
  tools::Config c;
  try {
    tools::apply_model_metadata(contents.metadata, c, {});
  } catch (const tools::UsageError& e) {
    throw tools::UsageError(str("--checkpoint ", path, ": ", e.what()));
  }
  if (!c.language_model())
    throw tools::UsageError(str("--checkpoint ", path, ": a model of --task ", c.task,
                                ", not a language model (train one with xgrad-train --task lm)"));
  tools::validate_read(c, contents.metadata, {}, "--checkpoint " + path);  // as xgrad-train checks its flags
  const auto hex = contents.metadata.find("lm.vocabulary");
  const std::optional<std::vector<std::uint8_t>> bytes =
      hex == contents.metadata.end() ? std::nullopt : tools::vocabulary_from_hex(hex->second);
  if (!bytes || bytes->size() != static_cast<std::size_t>(c.vocab))
    throw tools::UsageError(str("--checkpoint ", path, ": its lm.vocabulary is missing or damaged"));
  vocabulary = *bytes;
  check_settings_fit_tensors(contents, c, path);
  const auto size = [](int v) { return static_cast<std::size_t>(v); };
  auto model = std::make_unique<tools::GPT>(tools::GPTOptions{.vocab = vocabulary.size(),
                                                              .block = size(c.seq_len),
                                                              .layers = size(c.layers),
                                                              .heads = size(c.heads),
                                                              .d_model = size(c.d_model)});
  nn::load(contents, *model, nullptr, path);
  if (const std::optional<std::string> bad = tools::first_nonfinite(*model))
    throw tools::UsageError(str("--checkpoint ", path, ": the tensor ", *bad, " holds NaN or infinite values"));
  return model;
}

int run(int argc, char** argv) {
  Options o;
  CLI::App app{
      "xgrad-generate: continues a prompt with a language model trained by xgrad-train --task lm.\n"
      "Example: xgrad-generate --checkpoint kjv.safetensors --prompt \"And God said\" --tokens 500"};
  app.get_formatter()->column_width(30);
  app.add_option("--checkpoint", o.checkpoint, "a checkpoint written by xgrad-train --task lm")->required();
  app.add_option("--prompt", o.prompt,
                 "the text to continue (bytes of the model's vocabulary; default a line break, or the vocabulary's "
                 "first byte when the text had none)");
  app.add_option("--tokens", o.tokens, "bytes to generate")
      ->transform(tools::whole_number<std::size_t>())
      ->capture_default_str();
  app.add_option("--temperature", o.temperature, "divides the logits; 0 takes the most likely byte (greedy)")
      ->transform(tools::real_number())
      ->capture_default_str();
  app.add_option("--top-k", o.top_k, "draw among the k most likely bytes only (0: all)")
      ->transform(tools::whole_number<std::size_t>())
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the draws: the same seed gives the same text")
      ->transform(tools::whole_number<std::uint64_t>())
      ->capture_default_str();
  app.add_flag("--no-cache", o.no_cache, "recompute the whole window for every byte (the same text, slower)");
  app.add_option("--threads", o.threads, "threads (0: every core)")
      ->transform(tools::whole_number<int>())
      ->capture_default_str();
  app.add_option("--precision", o.precision, "float32 | bf16: the matrix products' operands (bf16: float32 sums)")
      ->check(CLI::IsMember({"float32", "bf16"}))
      ->capture_default_str();
  app.set_version_flag(
      "--version", str("xgrad-generate ", version(), " (", blas_summary(), "; bf16 products: ", bf16_summary(), ")"));
  if (const std::optional<int> printed = tools::parse_flags(app, argc, argv)) return *printed;
  if (o.prompt.empty()) throw tools::UsageError("--prompt must hold at least one byte");
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    throw tools::UsageError(str("--temperature must be a finite number >= 0, got ", o.temperature));
  if (o.threads < 0 || o.threads > max_threads())
    throw tools::UsageError(str("--threads must lie in [0, ", max_threads(), "], got ", o.threads));
  if (o.threads > 0) set_num_threads(o.threads);

  std::vector<std::uint8_t> vocabulary;
  std::unique_ptr<tools::GPT> model = load_model(o.checkpoint, vocabulary);
  if (app.count("--prompt") == 0 && std::find(vocabulary.begin(), vocabulary.end(), '\n') == vocabulary.end())
    o.prompt = std::string(1, static_cast<char>(vocabulary.front()));  // as xgrad-train's samples begin
  std::vector<std::int64_t> prompt;
  try {
    prompt = tools::encode(vocabulary, o.prompt);
  } catch (const Error& e) {
    throw tools::UsageError(str("--prompt: ", e.what()));
  }
  std::fwrite(o.prompt.data(), 1, o.prompt.size(), stdout);
  tools::check_stdout();
  Generator gen(o.seed);
  const AutocastGuard precision(o.precision == "bf16" ? Precision::bfloat16 : Precision::float32);
  const auto started = std::chrono::steady_clock::now();
  tools::generate(*model, prompt, o.tokens, {.temperature = o.temperature, .top_k = o.top_k, .use_cache = !o.no_cache},
                  gen, [&](std::int64_t token) {
                    std::putchar(vocabulary[static_cast<std::size_t>(token)]);
                    tools::check_stdout();
                  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::putchar('\n');
  tools::check_stdout();
  std::fprintf(stderr, "xgrad-generate: %zu bytes in %.2f s, %.0f bytes/s (%s)\n", o.tokens, seconds,
               static_cast<double>(o.tokens) / std::max(seconds, 1e-9), o.no_cache ? "no cache" : "key/value cache");
  return 0;
}

}  // namespace

// Every error is one line on stderr and exit status 2.
int main(int argc, char** argv) {
  return tools::run_tool("xgrad-generate", [&] { return run(argc, argv); });
}
