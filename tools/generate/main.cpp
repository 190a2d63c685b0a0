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

#include "cli.hpp"
#include "config.hpp"
#include "flags.hpp"
#include "gpt.hpp"
#include "trained_model.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/autograd/precision.hpp"

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
                  .at_least(1)
                  .fallback(500),
              real(&GenerateOptions::temperature, "temperature")
                  .help("divides the logits; 0 takes the most likely token (greedy)")
                  .at_least(0)
                  .fallback(0.8),
              whole(&GenerateOptions::top_k, "top-k")
                  .help("draw among the k most likely tokens only (0: all)")
                  .fallback(200)
                  .unused_when(&GenerateOptions::temperature, {"0", "-0"}, "greedy decoding draws nothing"),
              bind(&GenerateOptions::seed, flags::seed())
                  .help("seed of the draws: the same seed gives the same text")
                  .fallback(0)
                  .unused_when(&GenerateOptions::temperature, {"0", "-0"}, "greedy decoding draws nothing"),
              toggle(&GenerateOptions::no_cache, "no-cache")
                  .help("recompute the whole window for every token (the same text, slower)"),
              bind(&GenerateOptions::threads, flags::threads()).fallback(0),
              bind(&GenerateOptions::precision, flags::precision()).fallback("float32"),
          }};
}

int run(int argc, char** argv) {
  GenerateOptions o;
  tools::Given given;
  if (const std::optional<int> printed = tools::settings_of<GenerateOptions>().parse(argc, argv, o, given))
    return *printed;
  tools::settings_of<GenerateOptions>().check(o);
  tools::settings_of<GenerateOptions>().refuse_unused(o, given);
  if (o.prompt.empty()) throw tools::SettingError(flag(&GenerateOptions::prompt), " must hold at least one byte");
  if (o.threads > 0) set_num_threads(o.threads);

  tools::TrainedModel trained = tools::load_trained_model(flag(&GenerateOptions::checkpoint), o.checkpoint);
  const tools::ModelTokens& tokens = trained.tokens;
  models::CausalLM& model = *trained.model;
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
  tools::generate(
      model, prompt, o.tokens,
      {.temperature = o.temperature, .top_k = o.top_k, .use_cache = !o.no_cache, .vocabulary = tokens.size()}, gen,
      [&](std::int64_t token) {
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
