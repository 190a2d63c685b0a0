// xgrad-train's settings: one row per flag (settings.hpp says what a row declares). The
// rows are in the order their defaults are made: a default made from other settings
// (--warmup from --steps) comes after them. --help groups them by kind.
#include <algorithm>
#include <limits>

#include "config.hpp"
#include "flags.hpp"
#include "language_model.hpp"

namespace tools {

namespace {

// nanoGPT's shakespeare_char recipe on CPU (the flags of ../shared/bench/torch_lm_reference.py).
const Recipe<Config> lm{"lm", [](const Config& c) { return c.language_model(); }};

// The recipe's final rate and warmup, fitted to what was given instead: a final rate at
// most a tenth of --lr, a warmup at most a tenth of --steps, and neither for a schedule
// that does not use it (noam needs a warmup of at least 1).
double lm_min_lr(const Config& c) { return c.schedule == "cosine" ? std::min(1e-4, c.lr / 10) : 0.0; }
int lm_warmup(const Config& c) {
  const int warmup = std::min(100, c.steps / 10);
  return c.schedule == "cosine" ? warmup : c.schedule == "noam" ? std::max(1, warmup) : 0;
}

// The checkpoint keeps the feed-forward width itself (0 resolved), and the run's
// micro-batches per step over the whole job, which a resume shares among its own ranks.
bool read_width(std::int64_t width, Config& c) {
  if (width < std::numeric_limits<int>::min() || width > std::numeric_limits<int>::max()) return false;
  c.ff = static_cast<int>(width);
  return true;
}
bool read_micro_batches(std::int64_t micro_batches, Config& c) {
  if (c.eval_only) {  // no step to take: the ranks need not share the run's micro-batches
    c.accum_steps = 1;
    return true;
  }
  if (micro_batches % c.ranks != 0)
    throw UsageError(xgrad::str("the checkpoint's run took ", micro_batches,
                                micro_batches == 1 ? " micro-batch" : " micro-batches", " per step, which ", c.ranks,
                                " ranks cannot share: give ", flag(&Config::accum_steps)));
  const std::int64_t each = micro_batches / c.ranks;
  if (each < std::numeric_limits<int>::min() || each > std::numeric_limits<int>::max()) return false;
  c.accum_steps = static_cast<int>(each);
  return true;
}

using Rows = Settings<Config>::Rows;

// The model: kept in the checkpoint, the same on resume and fine-tuning.
Rows model_rows() {
  using namespace setting;
  return {
      choice(&Config::task, "task", {"copy", "reverse", "sort", "add", "lm"})
          .help("a toy sequence task (sort: ascending; add: digit-wise, least significant first), or lm: a "
                "character-level GPT learns the next byte of ",
                &Config::text)
          .model()
          .fallback("sort"),
      bind(&Config::seq_len, flags::seq_len()).model().fallback(16).with(lm, 64),
      bind(&Config::vocab, flags::vocab())
          .help("tokens are 0 .. vocab-1 (the digit base for add)")
          .model()
          .fallback(16)
          .unused_when(&Config::task, {"lm"}, "its vocabulary is the text's distinct bytes, or the tokenizer's"),
      bind(&Config::d_model, flags::d_model()).model().fallback(64).with(lm, 128),
      bind(&Config::heads, flags::heads()).model().fallback(4),
      bind(&Config::layers, flags::layers()).model().fallback(2).with(lm, 4),
      bind(&Config::ff, flags::ff())
          .model()
          .fallback(0)
          .recorded_as<std::int64_t>(
              "", [](const Config& c) { return c.ff_width(); }, read_width),
      choice(&Config::positions, "positions", {"learned", "sinusoidal"})
          .help("the toy tasks' position encoding: a learned table or the fixed sinusoids")
          .model()
          .fallback("learned")
          .unused_when(&Config::task, {"lm"},
                       "its models place positions themselves: gpt and gpt2 learn them, llama turns by RoPE"),
      choice(&Config::model, "model", {"gpt", "gpt2", "llama"})
          .help("lm: gpt is xgrad's character-level GPT (nanoGPT's layout); gpt2 and llama are the published "
                "families under Hugging Face's names, sized by ",
                &Config::model_config, " or by ", &Config::init_from, " DIR (a Hugging Face directory), else by ",
                &Config::layers, ", ", &Config::heads, ", ", &Config::d_model, " and ", &Config::seq_len)
          .model()
          .fallback("gpt")
          .absent_means("gpt")  // written before the published families
          .unused_unless(&Config::task, {"lm"}, "only ", &Config::task, " lm has model families"),
  };
}

// How it learns: kept, the same on resume; first the run's length (a run setting), which
// the recipe's warmup is made from.
Rows learning_rows() {
  using namespace setting;
  return {
      bind(&Config::steps, flags::steps())
          .run()
          .fallback(3000)
          .with(lm, 2000)
          .unused_with(&Config::eval_only, "it trains no steps"),
      bind(&Config::dropout, flags::dropout()).learning().fallback(0.0),
      bind(&Config::batch, flags::batch()).learning().fallback(64).with(lm, 12),
      real(&Config::lr, "lr")
          .help("learning rate (the peak, with a schedule)")
          .above(0)
          .learning()
          .fallback(3e-3)
          .with(lm, 1e-3)
          .unused_with(&Config::eval_only, "it trains no steps"),
      choice(&Config::optimizer, "optimizer", {"adam", "adamw", "sgd"})
          .help("sgd with momentum 0.9")
          .learning()
          .fallback("adam")
          .with(lm, "adamw")
          .unused_with(&Config::eval_only, "it trains no steps"),
      choice(&Config::schedule, "schedule", {"constant", "cosine", "noam", "step"})
          .help("the rate over the steps: cosine warms up linearly, then falls to ", &Config::min_lr, " at ",
                &Config::steps, "; noam warms up, peaking at ", &Config::lr, ", then decays; step halves it every ",
                &Config::steps, "/4 steps, rounded down (at least 1)")
          .learning()
          .fallback("constant")
          .with(lm, "cosine")
          .unused_with(&Config::eval_only, "it trains no steps"),
      real(&Config::min_lr, "min-lr")
          .help("cosine: the rate reached at ", &Config::steps)
          .learning()
          .fallback(0.0)
          .with(lm, lm_min_lr, "min(1e-4, ", &Config::lr, "/10) with cosine")
          .unused_with(&Config::eval_only, "it trains no steps"),
      real(&Config::weight_decay, "weight-decay")
          .help("on 2-D weights only, not biases or norms (adamw: decoupled)")
          .at_least(0)
          .learning()
          .fallback([](const Config& c) { return c.optimizer == "adamw" ? 0.01 : 0.0; }, "0, adamw 0.01")
          .with(lm, 0.1)
          .unused_with(&Config::eval_only, "it trains no steps"),
      real(&Config::beta2, "beta2")
          .help("adam, adamw: the second moment's decay")
          .at_least(0)
          .below(1)
          .learning()
          .fallback(0.999)
          .with(lm, 0.99)
          .unused_when(&Config::optimizer, {"sgd"}, "only adam and adamw keep a second moment")
          .unused_with(&Config::eval_only, "it trains no steps"),
      bind(&Config::warmup, flags::warmup())
          .learning()
          .fallback(0)
          .with(lm, lm_warmup, "min(100, ", &Config::steps, "/10) with cosine or noam (noam: at least 1)")
          .unused_unless(&Config::schedule, {"cosine", "noam"}, "only cosine and noam warm up")
          .unused_with(&Config::eval_only, "it trains no steps"),
      real(&Config::clip, "clip")
          .help("clip the gradient norm to this (0: off)")
          .at_least(0)
          .learning()
          .fallback(0.0)
          .with(lm, 1.0)
          .unused_with(&Config::eval_only, "it trains no steps"),
      bind(&Config::seed, flags::seed()).help("seed of the model, the data and dropout").learning().fallback(0),
      bind(&Config::precision, flags::precision())
          .learning()
          .fallback("float32")
          .absent_means("float32"),  // written before --precision existed
  };
}

// LoRA's adapters: learning settings too, kept on resume.
Rows adapter_rows() {
  using namespace setting;
  return {
      whole(&Config::lora, "lora")
          .help("train LoRA adapters of this rank on the frozen model (0: train every weight)")
          .at_least(0)
          .at_most(65536)
          .learning()
          .fallback(0)
          .absent_means("0")
          .unused_unless(&Config::model, {"gpt2", "llama"}, "LoRA adapts the published families"),
      real(&Config::lora_alpha, "lora-alpha")
          .help("LoRA's alpha: the adapters' output is scaled by alpha / rank")
          .above(0)
          .learning()
          .fallback([](const Config& c) { return 2.0 * std::max(1, c.lora); }, "2 x ", &Config::lora)
          .unused_when(&Config::lora, {"0"}, "give ", &Config::lora, " RANK too"),
      real(&Config::lora_dropout, "lora-dropout")
          .help("dropout on the adapters' input, in training")
          .at_least(0)
          .below(1)
          .learning()
          .fallback(0.0)
          .unused_when(&Config::lora, {"0"}, "give ", &Config::lora, " RANK too"),
      text(&Config::lora_targets, "lora-targets")
          .help("the Linear layers adapted, as PEFT's target_modules: names, comma-separated, each matching a layer "
                "whose path ends with it")
          .learning()
          .fallback([](const Config& c) { return std::string(c.model == "gpt2" ? "c_attn" : "q_proj,v_proj"); },
                    "PEFT's: c_attn for gpt2, q_proj,v_proj for llama")
          .unused_when(&Config::lora, {"0"}, "give ", &Config::lora, " RANK too"),
  };
}

// The run's own: kept, carried on on resume unless given again.
Rows run_rows() {
  using namespace setting;
  return {
      whole(&Config::accum_steps, "accum-steps")
          .help("micro-batches of ", &Config::batch, " / (ranks x ", &Config::accum_steps,
                ") sequences per step in each process (gradient accumulation; the same bits as ranks)")
          .at_least(1)
          .run()
          .fallback(1)
          .recorded_as<std::int64_t>(
              "micro-batches", [](const Config& c) { return c.micro_batches(); }, read_micro_batches)
          .absent_means("1")  // written before accumulation and ranks: one micro-batch
          .unused_with(&Config::eval_only, "it trains no steps"),
      whole(&Config::eval_every, "eval-every")
          .help("evaluate every this many steps, and at the end")
          .at_least(1)
          .run()
          .fallback(100)
          .with(lm, 250)
          .unused_with(&Config::eval_only, "it trains no steps"),
      whole(&Config::eval_size, "eval-size")
          .help("toy tasks: held-out sequences per evaluation")
          .at_least(1)
          .run()
          .fallback(1000)
          .unused_when(&Config::task, {"lm"}, "it evaluates ", &Config::eval_batches, " batches of each split"),
      whole(&Config::eval_batches, "eval-batches")
          .help("lm: batches of each split per evaluation (the same ones each time)")
          .at_least(1)
          .run()
          .fallback(20)
          .unused_unless(&Config::task, {"lm"}, "it evaluates ", &Config::eval_size, " held-out sequences"),
      real(&Config::target_exact, "target-exact")
          .help("toy tasks: stop once exact-match reaches this (above 1: never)")
          .at_least(0)
          .range_note(" (above 1: never stop on it)")
          .run()
          .fallback(0.99)
          .unused_when(&Config::task, {"lm"}, "its target is ", &Config::target_val_loss)
          .unused_with(&Config::eval_only, "it trains no steps"),
      real(&Config::target_val_loss, "target-val-loss")
          .help("stop once the validation loss is at or below this")
          .above(0)
          .run()
          .unused_with(&Config::eval_only, "it trains no steps"),
      whole(&Config::sample_every, "sample-every")
          .help("lm: also print a sample every this many steps (0: at the end only)")
          .at_least(0)
          .run()
          .fallback(0)
          .unused_unless(&Config::task, {"lm"}, "only ", &Config::task, " lm writes samples")
          .unused_with(&Config::eval_only, "it trains no steps"),
      bind(&Config::text, flags::text())
          .help("lm: the text file to learn, byte by byte")
          .run()
          .fallback("")
          .with(
              lm, [](const Config& c) { return c.data.empty() ? std::string(XGRAD_DEFAULT_TEXT) : std::string(); },
              "data/kjv.txt, which ./run prepares (none with ", &Config::data, ")")
          .unused_unless(&Config::task, {"lm"}, "only ", &Config::task, " lm reads a text"),
      path(&Config::data, "data")
          .help("lm: a folder of token shards to learn instead of ", &Config::text,
                " (xgrad-tokenize's, or llm.c's: names with the word train, or val for the validation split)")
          .run()
          .fallback("")
          .unused_unless(&Config::task, {"lm"}, "only ", &Config::task, " lm reads token shards"),
      bind(&Config::tokenizer, flags::tokenizer())
          .help("lm: the tokenizer that made ", &Config::data,
                "'s shards: a folder with encoder.json and vocab.bpe, those two files joined by a comma, or a "
                "tiktoken rank file")
          .run()
          .fallback([](const Config& c) { return c.data; }, &Config::data, "'s folder")
          .unused_without(&Config::data, "it is the vocabulary of ", &Config::data, "'s shards"),
  };
}

// This process's: threads, files, what it prints.
Rows local_rows() {
  using namespace setting;
  return {
      bind(&Config::threads, flags::threads())
          .help("threads (0: every core; under mpirun the machine's cores / its ranks)")
          .fallback(0),
      real(&Config::comm_timeout, "comm-timeout")
          .help("under mpirun: seconds a rank waits for the others in one communication before the job is taken as "
                "broken (a network link down, a rank stuck or gone): rank 0 then saves and says so; longer than "
                "rank 0 alone takes to write a checkpoint or print samples")
          .at_least(0.001)
          .at_most(1e6)
          .range_note(" seconds")
          .fallback(20.0),
      path(&Config::save, "save")
          .help("write a checkpoint here at every evaluation, at the end and on Ctrl-C (an existing file only when "
                "it is the checkpoint resumed or another of xgrad-train's for the same ",
                &Config::task, ")")
          .unused_with(&Config::eval_only, "it writes nothing but ", &Config::metrics),
      path(&Config::resume, "resume").help("continue this checkpoint's run exactly"),
      path(&Config::init_from, "init-from")
          .help("start from this checkpoint's weights with new learning settings; gpt2, llama: or from a Hugging Face "
                "directory (config.json and model.safetensors, or shards with their index; ",
                &Config::task, " lm and ", &Config::model, " follow from it)"),
      path(&Config::model_config, "model-config")
          .help("gpt2, llama: a Hugging Face config.json giving the model's sizes")
          .unused_unless(&Config::model, {"gpt2", "llama"}, "only gpt2 and llama read a config.json"),
      path(&Config::save_hf, "save-hf")
          .help("gpt2, llama: write the trained model as a Hugging Face directory here at the end (with ",
                &Config::lora, ": the adapters, as PEFT's adapter_model.safetensors and adapter_config.json)")
          .unused_unless(&Config::model, {"gpt2", "llama"}, "only gpt2 and llama have Hugging Face's layout")
          .unused_with(&Config::eval_only, "it writes nothing but ", &Config::metrics),
      bind(&Config::recompute, flags::recompute())
          .unused_unless(&Config::task, {"lm"}, "only ", &Config::task, " lm has blocks to recompute")
          .unused_with(&Config::eval_only, "it trains no steps"),
      bind(&Config::keep_denormals, flags::keep_denormals())
          .learning()
          .absent_means("true"),  // written before flushing: those runs kept them, and resume as they ran
      toggle(&Config::eval_only, "eval-only")
          .help("with ", &Config::resume, " or ", &Config::init_from, ": evaluate the weights, print, and stop"),
      path(&Config::metrics, "metrics")
          .help("append a JSON line per evaluation here: step, train_loss, val_loss, lr, train_s, wall_s (toy tasks: "
                "also token_acc, exact_match), then a final line"),
      path(&Config::plot, "plot")
          .help("draw the learning curve (train and validation loss) to this PNG at each evaluation")
          .unused_with(&Config::eval_only, "it writes nothing but ", &Config::metrics),
      path(&Config::attention_png, "attention-png")
          .help("draw the last layer's attention maps to this PNG")
          .unused_with(&Config::eval_only, "it writes nothing but ", &Config::metrics)
          .unused_when(&Config::model, {"gpt2", "llama"}, "only ", &Config::model, " gpt keeps its attention maps"),
      bind(&Config::profile, flags::profile())
          .help("profile ", flags::profile_steps, " steps after ", std::to_string(kProfileWarmupSteps),
                " warm-up steps (fewer when an evaluation comes first): print the table of where the time went, "
                "write PATH.json (a Chrome trace: Perfetto, chrome://tracing) and PATH.png (a timeline of the last "
                "step)")
          .unused_with(&Config::eval_only, "it writes nothing but ", &Config::metrics),
      bind(&Config::profile_steps, flags::profile_steps())
          .fallback(5)
          .unused_without(&Config::profile, "give ", &Config::profile, " PATH too"),
      toggle(&Config::quiet, "quiet").help("print only the final summary"),
      toggle(&Config::verbose, "verbose").help("first print the BLAS kernels, the threads and the precision in use"),
      toggle(&Config::allow_nonfinite, "allow-nonfinite")
          .help("keep training after a NaN or infinite loss (default: stop)"),
  };
}

}  // namespace

// xgrad-train's table: one row per flag (settings.hpp), in the order their defaults are
// made.
Settings<Config> settings_table(std::type_identity<Config>) {
  Rows rows;
  for (Rows (*part)() : {model_rows, learning_rows, adapter_rows, run_rows, local_rows}) {
    const Rows made = part();
    rows.insert(rows.end(), made.begin(), made.end());
  }
  return {"xgrad-train",
          Text::of("trains a small transformer encoder on a toy sequence task, or a character-level GPT on a text (",
                   &Config::task, " lm).\nExamples: xgrad-train ", &Config::task, " reverse ", &Config::seq_len, " 8 ",
                   &Config::steps, " 500\n          xgrad-train ", &Config::task, " lm ", &Config::save,
                   " kjv.safetensors"),
          rows,
          {lm}};
}

bool parse_command_line(int argc, char** argv, Config& config, Given& given) {
  return !settings_of<Config>().parse(argc, argv, config, given).has_value();
}

void check_task_flags(const Config& config, const Given& given) {
  settings_of<Config>().refuse_unused(config, given);
  // A Hugging Face folder holds a published family's model, which only --task lm with its
  // family starts from (another model would start afresh, the folder unread).
  if (is_hf_directory(config.init_from) && !(config.language_model() && config.published_model())) {
    const std::string family = hf_model_family(config.init_from);
    const Flag blamed = config.language_model() ? flag(&Config::model) : flag(&Config::task);
    throw SettingError(
        blamed, xgrad::str(" ", config.language_model() ? config.model : config.task, " cannot start from ",
                           flag(&Config::init_from), " ", config.init_from, ", a Hugging Face ", family,
                           " model: it starts ", flag(&Config::task), " lm ", flag(&Config::model), " ", family));
  }
  if (!config.published_model()) return;
  // A published model started from a checkpoint's weights has its dropout in the
  // checkpoint's model config (a resumed run checks --dropout against the checkpoint).
  if (!config.init_from.empty() && !is_hf_directory(config.init_from) && given.count(flag(&Config::dropout).name()))
    throw SettingError(flag(&Config::dropout), xgrad::str(" does nothing here: the model's dropout comes from ",
                                                          flag(&Config::init_from), "'s model config"));
  // A checkpoint's model config, or a folder's config.json, comes before --model-config.
  // (Both given: validation refuses the pair.)
  if (given.count(flag(&Config::model_config).name()) && config.init_from.empty() != config.resume.empty())
    throw SettingError(flag(&Config::model_config),
                       xgrad::str(" does nothing here: the model's sizes come from ",
                                  config.resume.empty() ? flag(&Config::init_from) : flag(&Config::resume),
                                  is_hf_directory(config.init_from) ? "'s config.json" : "'s checkpoint"));
  // One read from a config.json has its sizes and dropout there.
  if (config.model_config.empty() && !is_hf_directory(config.init_from)) return;
  const Flag source = config.model_config.empty() ? flag(&Config::init_from) : flag(&Config::model_config);
  for (const Flag& size : {flag(&Config::layers), flag(&Config::heads), flag(&Config::d_model), flag(&Config::ff)})
    if (given.count(size.name()))
      throw SettingError(size,
                         xgrad::str(" does nothing here: the model's sizes come from ", source, "'s config.json"));
  if (given.count(flag(&Config::dropout).name()))
    throw SettingError(flag(&Config::dropout),
                       xgrad::str(" does nothing here: the model's dropout comes from ", source, "'s config.json"));
}

}  // namespace tools
