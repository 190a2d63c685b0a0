#include "config.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>

#include "numbers.hpp"
#include "xgrad/autograd/blas.hpp"
#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/autograd/precision.hpp"
#include "xgrad/autograd/version.hpp"

namespace tools {

namespace {

const std::set<std::string> kTasks = {"copy", "reverse", "sort", "add", "lm"};
const std::set<std::string> kPositions = {"learned", "sinusoidal"};
const std::set<std::string> kOptimizers = {"adam", "adamw", "sgd"};
const std::set<std::string> kSchedules = {"constant", "cosine", "noam", "step"};
const std::set<std::string> kPrecisions = {"float32", "bf16"};

// A number as text that reads back to the same double.
std::string exact_text(double v) {
  std::ostringstream text;
  text.precision(17);
  text << v;
  return text.str();
}

// The model's settings by flag name, as text (what checkpoints store).
std::map<std::string, std::string> model_settings(const Config& c) {
  return {{"task", c.task},
          {"seq-len", std::to_string(c.seq_len)},
          {"vocab", std::to_string(c.vocab)},
          {"d-model", std::to_string(c.d_model)},
          {"heads", std::to_string(c.heads)},
          {"layers", std::to_string(c.layers)},
          {"ff", std::to_string(c.ff_width())},
          {"positions", c.positions}};
}

// Every setting a resumed run must share: the model's and how it learns.
std::map<std::string, std::string> learning_settings(const Config& c) {
  std::map<std::string, std::string> settings = model_settings(c);
  settings.merge(std::map<std::string, std::string>{{"dropout", exact_text(c.dropout)},
                                                    {"batch", std::to_string(c.batch)},
                                                    {"lr", exact_text(c.lr)},
                                                    {"min-lr", exact_text(c.min_lr)},
                                                    {"optimizer", c.optimizer},
                                                    {"schedule", c.schedule},
                                                    {"weight-decay", exact_text(c.weight_decay)},
                                                    {"beta2", exact_text(c.beta2)},
                                                    {"warmup", std::to_string(c.warmup)},
                                                    {"clip", exact_text(c.clip)},
                                                    {"seed", std::to_string(c.seed)},
                                                    {"precision", c.precision}});
  return settings;
}

// --task lm's defaults: nanoGPT's shakespeare_char recipe on CPU (the flags of
// ../shared/bench/torch_lm_reference.py).
void apply_language_model_defaults(Config& c, const std::set<std::string>& given) {
  const auto fallback = [&](const char* flag, auto& field, auto value) {
    if (!given.count(flag)) field = value;
  };
  fallback("seq-len", c.seq_len, 64);
  fallback("batch", c.batch, 12);
  fallback("layers", c.layers, 4);
  fallback("heads", c.heads, 4);
  fallback("d-model", c.d_model, 128);
  fallback("steps", c.steps, 2000);
  fallback("optimizer", c.optimizer, std::string("adamw"));
  fallback("lr", c.lr, 1e-3);
  fallback("schedule", c.schedule, std::string("cosine"));
  // The recipe's final rate and warmup, fitted to what was given instead: a final rate
  // at most a tenth of --lr, a warmup at most a tenth of --steps, and neither for a
  // schedule that does not use it (noam needs a warmup of at least 1).
  fallback("min-lr", c.min_lr, c.schedule == "cosine" ? std::min(1e-4, c.lr / 10) : 0.0);
  const int warmup = std::min(100, c.steps / 10);
  fallback("warmup", c.warmup, c.schedule == "cosine" ? warmup : c.schedule == "noam" ? std::max(1, warmup) : 0);
  fallback("weight-decay", c.weight_decay, 0.1);
  fallback("beta2", c.beta2, 0.99);
  fallback("clip", c.clip, 1.0);
  fallback("eval-every", c.eval_every, 250);
  fallback("text", c.text, std::string(XGRAD_DEFAULT_TEXT));
}

}  // namespace

bool parse_command_line(int argc, char** argv, Config& c, std::set<std::string>& given) {
  CLI::App app{
      "xgrad-train: trains a small transformer encoder on a toy sequence task, or a character-level GPT on a "
      "text (--task lm).\n"
      "Examples: xgrad-train --task reverse --seq-len 8 --steps 500\n"
      "          xgrad-train --task lm --save kjv.safetensors"};
  app.get_formatter()->column_width(30);
  const CLI::Validator whole = whole_number<int>(), real = real_number();
  app.add_option("--task", c.task,
                 "copy | reverse | sort (ascending) | add (digit-wise, least significant first) | lm (next byte of "
                 "--text)")
      ->check(CLI::IsMember(kTasks))
      ->capture_default_str();
  app.add_option("--text", c.text, "lm: the text file to learn (default: the King James Bible that ./run prepares)");
  app.add_option("--seq-len", c.seq_len, "tokens per sequence")->capture_default_str();
  app.add_option("--vocab", c.vocab, "tokens are 0 .. vocab-1 (the digit base for add)")->capture_default_str();
  app.add_option("--d-model", c.d_model, "model width")->capture_default_str();
  app.add_option("--heads", c.heads, "attention heads (must divide d-model)")->capture_default_str();
  app.add_option("--layers", c.layers, "encoder layers")->capture_default_str();
  app.add_option("--ff", c.ff, "feed-forward width (0: 4 x d-model)")->capture_default_str();
  app.add_option("--dropout", c.dropout, "dropout in every layer, [0, 1)")->capture_default_str();
  app.add_option("--positions", c.positions, "learned | sinusoidal")
      ->check(CLI::IsMember(kPositions))
      ->capture_default_str();
  app.add_option("--batch", c.batch, "sequences per step")->capture_default_str();
  app.add_option("--steps", c.steps, "most training steps")->capture_default_str();
  app.add_option("--lr", c.lr, "learning rate (the peak, with a schedule)")->capture_default_str();
  app.add_option("--min-lr", c.min_lr, "cosine: the rate reached at --steps")->capture_default_str();
  app.add_option("--weight-decay", c.weight_decay,
                 "on 2-D weights only, not biases or norms (adamw: decoupled; default 0.01, lm 0.1)")
      ->capture_default_str();
  app.add_option("--optimizer", c.optimizer, "adam | adamw | sgd (momentum 0.9)")
      ->check(CLI::IsMember(kOptimizers))
      ->capture_default_str();
  app.add_option("--beta2", c.beta2, "adam, adamw: the second moment's decay (lm: 0.99)")->capture_default_str();
  app.add_option("--schedule", c.schedule,
                 "constant | cosine (linear warmup, then to --min-lr at --steps) | noam | step (x0.5 every steps/4)")
      ->check(CLI::IsMember(kSchedules))
      ->capture_default_str();
  app.add_option("--warmup", c.warmup, "warmup steps for cosine and noam")->capture_default_str();
  app.add_option("--clip", c.clip, "clip the gradient norm to this (0: off)")->capture_default_str();
  app.add_option("--seed", c.seed, "seed for the model, the data and dropout")
      ->transform(whole_number<std::uint64_t>())
      ->capture_default_str();
  app.add_option("--precision", c.precision,
                 "float32 | bf16: the matrix products' operands in bfloat16, their sums and everything else in "
                 "float32 (mixed precision; the checkpoint stays float32)")
      ->check(CLI::IsMember(kPrecisions))
      ->capture_default_str();
  app.add_option("--threads", c.threads, "threads (0: every core; under mpirun the machine's cores / its ranks)")
      ->capture_default_str();
  app.add_option("--comm-timeout", c.comm_timeout,
                 "under mpirun: seconds a rank waits for the others in one communication before the job is "
                 "taken as broken (a network link down, a rank stuck or gone): rank 0 then saves and says so; "
                 "longer than rank 0 alone takes to write a checkpoint or print samples")
      ->capture_default_str();
  app.add_option("--accum-steps", c.accum_steps,
                 "micro-batches of batch / (ranks x accum-steps) sequences per step in each process (gradient "
                 "accumulation; the same bits as ranks)")
      ->capture_default_str();
  app.add_option("--eval-every", c.eval_every, "evaluate every this many steps")->capture_default_str();
  app.add_option("--eval-size", c.eval_size, "toy tasks: held-out sequences per evaluation")->capture_default_str();
  app.add_option("--eval-batches", c.eval_batches, "lm: batches of each split per evaluation (the same ones each time)")
      ->capture_default_str();
  app.add_option("--target-exact", c.target_exact, "toy tasks: stop once exact-match reaches this (above 1: never)")
      ->capture_default_str();
  app.add_option("--target-val-loss", c.target_val_loss, "stop once the validation loss is at or below this");
  app.add_option("--sample-every", c.sample_every, "lm: also print a sample every this many steps (0: at the end only)")
      ->capture_default_str();
  app.add_option("--save", c.save, "write a checkpoint here at every evaluation, at the end and on Ctrl-C");
  app.add_option("--resume", c.resume, "continue this checkpoint's run exactly");
  app.add_option("--init-from", c.init_from, "start from this checkpoint's weights with new learning settings");
  app.add_flag("--eval-only", c.eval_only, "with --resume or --init-from: evaluate the weights, print, and stop");
  app.add_option("--metrics", c.metrics,
                 "append a JSON line per evaluation here: step, train_loss, val_loss, lr, train_s, wall_s (toy "
                 "tasks: also token_acc, exact_match), then a final line");
  app.add_option("--plot", c.plot,
                 "draw the learning curve (train and validation loss) to this PNG at each evaluation");
  app.add_option("--attention-png", c.attention_png, "draw the last layer's attention maps to this PNG");
  app.add_option("--profile", c.profile,
                 "profile --profile-steps steps after 3 warm-up steps (up to an evaluation): print the table of "
                 "where the time went, write PATH.json (a Chrome trace: Perfetto, chrome://tracing) and PATH.png "
                 "(a timeline of the last step)");
  app.add_option("--profile-steps", c.profile_steps, "with --profile: steps recorded")->capture_default_str();
  app.add_flag("--quiet", c.quiet, "print only the final summary");
  app.add_flag("--verbose", c.verbose, "first print the BLAS kernels and threads in use");
  app.add_flag("--allow-nonfinite", c.allow_nonfinite, "keep training after a NaN or infinite loss (default: stop)");
  for (const char* flag : {"--seq-len", "--vocab", "--d-model", "--heads", "--layers", "--ff", "--batch", "--steps",
                           "--warmup", "--threads", "--eval-every", "--eval-size", "--eval-batches", "--sample-every",
                           "--accum-steps", "--profile-steps"})
    app.get_option(flag)->transform(whole);
  for (const char* flag : {"--dropout", "--lr", "--min-lr", "--weight-decay", "--beta2", "--clip", "--target-exact",
                           "--target-val-loss", "--comm-timeout"})
    app.get_option(flag)->transform(real);
  app.set_version_flag("--version", xgrad::str("xgrad-train ", xgrad::version(), " (", xgrad::blas_summary(),
                                               "; bf16 products: ", xgrad::bf16_summary(), ")"));
  app.footer(
      "--task lm defaults (nanoGPT's shakespeare_char recipe): --seq-len 64 --batch 12 --layers 4 --heads 4 "
      "--d-model 128 --steps 2000 --optimizer adamw --lr 1e-3 --min-lr 1e-4 --schedule cosine --warmup 100 "
      "--weight-decay 0.1 --beta2 0.99 --clip 1 --eval-every 250 (--min-lr at most --lr/10 and --warmup at most "
      "--steps/10 unless given; neither without a schedule that uses it).\n"
      "--save replaces an existing file only when it is the checkpoint being resumed or another xgrad-train "
      "checkpoint of the same --task.\nRuns on " +
      xgrad::blas_summary() + ", " + std::to_string(xgrad::num_threads()) + " threads.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    app.exit(e);
    return false;
  } catch (const CLI::CallForVersion& e) {
    app.exit(e);
    return false;
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  for (const CLI::Option* option : app.get_options())
    if (option->count() > 0) given.insert(option->get_name().substr(2));
  for (const auto& [flag, path] : {std::pair<const char*, const std::string&>{"save", c.save},
                                   {"resume", c.resume},
                                   {"init-from", c.init_from},
                                   {"metrics", c.metrics},
                                   {"plot", c.plot},
                                   {"text", c.text},
                                   {"attention-png", c.attention_png},
                                   {"profile", c.profile}})
    if (given.count(flag) && path.empty()) throw UsageError(xgrad::str("--", flag, " needs a file name, got \"\""));
  if (c.language_model()) apply_language_model_defaults(c, given);
  if (!given.count("weight-decay") && !c.language_model() && c.optimizer == "adamw") c.weight_decay = 0.01;
  return true;
}

void validate(const Config& c) {
  for (const auto& [flag, value] : {std::pair<const char*, long long>{"seq-len", c.seq_len},
                                    {"vocab", c.vocab},
                                    {"d-model", c.d_model},
                                    {"heads", c.heads},
                                    {"layers", c.layers},
                                    {"batch", c.batch},
                                    {"steps", c.steps},
                                    {"eval-every", c.eval_every},
                                    {"eval-size", c.eval_size},
                                    {"eval-batches", c.eval_batches},
                                    {"profile-steps", c.profile_steps},
                                    {"accum-steps", c.accum_steps}})
    check_at_least(std::string("--") + flag, value, 1LL);
  if (c.batch % c.micro_batches() != 0)
    throw UsageError(xgrad::str("--batch ", c.batch, " does not divide into ", c.ranks, " rank", c.ranks > 1 ? "s" : "",
                                " x --accum-steps ", c.accum_steps, " = ", c.micro_batches(), " equal micro-batches"));
  if (c.d_model % c.heads != 0)
    throw UsageError(xgrad::str("--heads ", c.heads, " does not divide --d-model ", c.d_model));
  for (const auto& [flag, value] : {std::pair<const char*, long long>{"ff", c.ff},
                                    {"warmup", c.warmup},
                                    {"threads", c.threads},
                                    {"sample-every", c.sample_every}})
    check_at_least(std::string("--") + flag, value, 0LL);
  if (c.threads > xgrad::max_threads())
    throw UsageError(xgrad::str("--threads ", c.threads, " is more than ", xgrad::max_threads(),
                                " (4 per CPU this process may use)"));
  const auto member = [](const char* flag, const std::string& value, const std::set<std::string>& allowed) {
    if (!allowed.count(value))
      throw UsageError(xgrad::str("--", flag, " ", value, " is not one of ",
                                  xgrad::listed(std::vector<std::string>(allowed.begin(), allowed.end()))));
  };
  member("task", c.task, kTasks);  // flags were checked as parsed; these may come from a checkpoint
  member("positions", c.positions, kPositions);
  member("optimizer", c.optimizer, kOptimizers);
  member("schedule", c.schedule, kSchedules);
  member("precision", c.precision, kPrecisions);
  const auto finite = [](const char* flag, double v) {
    if (!std::isfinite(v)) throw UsageError(xgrad::str("--", flag, " must be a finite number, got ", v));
  };
  finite("dropout", c.dropout);
  finite("lr", c.lr);
  finite("clip", c.clip);
  finite("target-exact", c.target_exact);
  finite("min-lr", c.min_lr);
  finite("weight-decay", c.weight_decay);
  finite("beta2", c.beta2);
  if (c.target_val_loss) finite("target-val-loss", *c.target_val_loss);
  if (!(c.dropout >= 0 && c.dropout < 1)) throw UsageError(xgrad::str("--dropout must lie in [0, 1), got ", c.dropout));
  if (!(c.target_exact >= 0))
    throw UsageError(xgrad::str("--target-exact cannot be negative (above 1: never stop on it), got ", c.target_exact));
  if (!(c.lr > 0)) throw UsageError(xgrad::str("--lr must be positive, got ", c.lr));
  if (!(c.clip >= 0)) throw UsageError(xgrad::str("--clip cannot be negative, got ", c.clip));
  if (!(c.comm_timeout >= 0.001 && c.comm_timeout <= 1e6))
    throw UsageError(xgrad::str("--comm-timeout must lie in [0.001, 1000000] seconds, got ", c.comm_timeout));
  if (!(c.weight_decay >= 0)) throw UsageError(xgrad::str("--weight-decay cannot be negative, got ", c.weight_decay));
  if (!(c.beta2 >= 0 && c.beta2 < 1)) throw UsageError(xgrad::str("--beta2 must lie in [0, 1), got ", c.beta2));
  if (!(c.min_lr >= 0 && c.min_lr <= c.lr))
    throw UsageError(xgrad::str("--min-lr ", c.min_lr, " must lie in [0, --lr ", c.lr, "]"));
  if (c.min_lr > 0 && c.schedule != "cosine")
    throw UsageError("--min-lr is the end of the cosine schedule: it needs --schedule cosine");
  if (c.target_val_loss && !(*c.target_val_loss > 0)) throw UsageError("--target-val-loss must be positive");
  if (!c.resume.empty() && !c.init_from.empty())
    throw UsageError("--resume continues a run, --init-from starts a new one from its weights: give one of them");
  if (c.eval_only && c.resume.empty() && c.init_from.empty())
    throw UsageError("--eval-only evaluates a checkpoint: give it with --resume or --init-from");
  if (c.language_model()) {
    if (c.ff != 0 && c.ff != std::int64_t{4} * c.d_model)
      throw UsageError(
          xgrad::str("--task lm's MLP is 4 x --d-model = ", std::int64_t{4} * c.d_model, " wide, got --ff ", c.ff));
    if (c.dropout != 0) throw UsageError("--task lm trains without dropout (nanoGPT's recipe): --dropout must be 0");
    if (c.positions != "learned")
      throw UsageError("--task lm learns its positions (GPT-2's layout): --positions learned");
    if (c.text.empty()) throw UsageError("--task lm needs --text");
  }
  if (c.task == "add" && (c.seq_len < 2 || c.vocab < 2))
    throw UsageError("--task add needs --seq-len >= 2 and --vocab >= 2 (two numbers, digits in base vocab)");
  if (c.schedule == "cosine" && c.warmup >= c.steps) throw UsageError("--warmup must be below --steps for cosine");
  if (c.schedule == "noam" && c.warmup < 1) throw UsageError("--schedule noam needs --warmup >= 1");
}

void check_task_flags(const Config& c, const std::set<std::string>& given) {
  const auto not_for = [&](const char* flag, const char* which, const char* instead) {
    if (given.count(flag)) throw UsageError(xgrad::str("--", flag, " is not used by ", which, " (", instead, ")"));
  };
  if (c.language_model()) {
    not_for("vocab", "--task lm", "its vocabulary is the text's distinct bytes");
    not_for("eval-size", "--task lm", "it evaluates --eval-batches batches of each split");
    not_for("target-exact", "--task lm", "its target is --target-val-loss");
  } else {
    const std::string task = "--task " + c.task;
    not_for("text", task.c_str(), "only --task lm reads a text");
    not_for("eval-batches", task.c_str(), "it evaluates --eval-size held-out sequences");
    not_for("sample-every", task.c_str(), "only --task lm writes samples");
  }
  // And those the chosen options make meaningless.
  if (c.optimizer == "sgd") not_for("beta2", "--optimizer sgd", "only adam and adamw keep a second moment");
  if (c.schedule != "cosine" && c.schedule != "noam") {
    const std::string schedule = "--schedule " + c.schedule;
    not_for("warmup", schedule.c_str(), "only cosine and noam warm up");
  }
  if (c.eval_only)
    for (const char* flag : {"save", "plot", "attention-png", "profile"})
      not_for(flag, "--eval-only", "it writes nothing but --metrics");
  if (c.profile.empty()) not_for("profile-steps", "a run without --profile", "give --profile PATH too");
}

namespace {

// The run's own settings: carried over on --resume unless given again.
std::map<std::string, std::string> run_settings(const Config& c) {
  std::map<std::string, std::string> settings = {
      {"steps", std::to_string(c.steps)},           {"eval-every", std::to_string(c.eval_every)},
      {"eval-size", std::to_string(c.eval_size)},   {"eval-batches", std::to_string(c.eval_batches)},
      {"target-exact", exact_text(c.target_exact)}, {"sample-every", std::to_string(c.sample_every)}};
  if (c.target_val_loss) settings["target-val-loss"] = exact_text(*c.target_val_loss);
  if (!c.text.empty()) settings["text"] = c.text;
  settings["micro-batches"] = std::to_string(c.micro_batches());
  return settings;
}

// A checkpoint's entry as a message shows it: on one line (line breaks as \n), at most
// 40 characters.
std::string one_line(const std::string& text) {
  std::string shown;
  for (const char c : text.substr(0, 40)) shown += c == '\n' ? std::string("\\n") : std::string(1, c);
  return text.size() > 40 ? shown + "..." : shown;
}

// Reads the checkpoint's `key` into `field` strictly; a damaged value is named with what
// it holds.
template <class Field>
void read_setting(const Metadata& m, const std::string& key, Field& field) {
  const std::string& text = m.at(key);
  if constexpr (std::is_same_v<Field, std::string>) {
    field = text;
  } else {
    constexpr bool real = std::is_same_v<Field, double> || std::is_same_v<Field, std::optional<double>>;
    std::optional<std::conditional_t<real, double, Field>> value;
    if constexpr (real)
      value = parse_real(text);
    else
      value = parse_whole<Field>(text);
    if (!value)
      throw UsageError(xgrad::str("the checkpoint's ", key, " = '", one_line(text), "' is not ",
                                  real ? "a number" : "a whole number in range"));
    field = *value;
  }
}

// A setting as people read it: a real number in its shortest exact form ("0.1", not the
// stored "0.10000000000000001").
std::string readable(const std::string& flag, const std::string& text) {
  static const std::set<std::string> real = {"dropout", "lr", "min-lr", "weight-decay", "beta2", "clip"};
  const std::optional<double> value = real.count(flag) ? parse_real(text) : std::nullopt;
  if (!value) return text;
  char shortest[32];
  const auto [end, error] = std::to_chars(shortest, shortest + sizeof shortest, *value);
  return error == std::errc() ? std::string(shortest, end) : text;
}

// Every flag of `asked` must be in the checkpoint, and agree with it when given.
void check_agreement(const Metadata& m, const std::map<std::string, std::string>& asked,
                     const std::set<std::string>& given) {
  for (const auto& [flag, value] : asked) {
    const auto it = m.find("config." + flag);
    if (it == m.end())
      throw UsageError("the checkpoint has no setting for --" + flag + " (not written by this xgrad-train?)");
    if (given.count(flag) && it->second != value)
      throw UsageError("the checkpoint is from another config: --" + flag + " " + readable(flag, value) + " here, " +
                       readable(flag, it->second) + " in the checkpoint");
  }
}

void read_model_settings(const Metadata& m, Config& c) {
  const auto learned = [&](const char* flag, auto& field) { read_setting(m, std::string("config.") + flag, field); };
  learned("task", c.task), learned("positions", c.positions), learned("seq-len", c.seq_len);
  learned("vocab", c.vocab), learned("d-model", c.d_model), learned("heads", c.heads);
  learned("layers", c.layers), learned("ff", c.ff);
}

// The curve as text ("step train val" lines, numbers exact), and back (nothing when
// damaged).
std::string curve_to_text(const std::vector<CurvePoint>& points) {
  std::ostringstream text;
  text.precision(17);
  for (const CurvePoint& p : points) text << p.step << ' ' << p.train_loss << ' ' << p.val_loss << '\n';
  return text.str();
}

std::optional<std::vector<CurvePoint>> curve_from_text(const std::string& text) {
  std::vector<CurvePoint> points;
  const char* at = text.data();
  const char* const end = text.data() + text.size();
  // Reads one number and the one separator after it; from_chars also reads nan and inf.
  const auto field = [&](auto& value, char separator) {
    const auto [next, error] = std::from_chars(at, end, value);
    if (error != std::errc() || next == end || *next != separator) return false;
    at = next + 1;
    return true;
  };
  while (at != end) {
    CurvePoint p;
    if (!field(p.step, ' ') || !field(p.train_loss, ' ') || !field(p.val_loss, '\n') || p.step < 0) return std::nullopt;
    points.push_back(p);
  }
  return points;
}

}  // namespace

Metadata to_metadata(const Config& c) {
  Metadata m;
  for (const auto& [flag, value] : learning_settings(c)) m["config." + flag] = value;
  for (const auto& [flag, value] : run_settings(c)) m["run." + flag] = value;
  return m;
}

void apply_metadata(const Metadata& checkpoint, Config& c, const std::set<std::string>& given) {
  Metadata m = checkpoint;
  m.try_emplace("config.precision", "float32");  // written before --precision existed: float32
  check_agreement(m, learning_settings(c), given);
  read_model_settings(m, c);
  const auto learned = [&](const char* flag, auto& field) { read_setting(m, std::string("config.") + flag, field); };
  learned("dropout", c.dropout), learned("batch", c.batch), learned("lr", c.lr), learned("min-lr", c.min_lr);
  learned("optimizer", c.optimizer), learned("schedule", c.schedule), learned("weight-decay", c.weight_decay);
  learned("beta2", c.beta2);
  learned("warmup", c.warmup), learned("clip", c.clip), learned("seed", c.seed), learned("precision", c.precision);
  const auto carry = [&](const char* flag, auto& field) {
    const std::string key = std::string("run.") + flag;
    if (m.count(key) && !given.count(flag)) read_setting(m, key, field);
  };
  carry("steps", c.steps);
  carry("eval-every", c.eval_every);
  carry("eval-size", c.eval_size);
  carry("eval-batches", c.eval_batches);
  carry("target-exact", c.target_exact);
  carry("target-val-loss", c.target_val_loss);
  carry("sample-every", c.sample_every);
  carry("text", c.text);
  // The checkpoint's micro-batches per step, over this job's ranks, unless given again.
  int micro_batches = 1;
  carry("micro-batches", micro_batches);
  if (!given.count("accum-steps")) {
    if (micro_batches % c.ranks != 0)
      throw UsageError(xgrad::str("the checkpoint's run took ", micro_batches, " micro-batches per step, which ",
                                  c.ranks, " ranks cannot share: give --accum-steps"));
    c.accum_steps = micro_batches / c.ranks;
  }
}

void validate_read(const Config& c, const Metadata& m, const std::set<std::string>& given, const std::string& source) {
  try {
    validate(c);
  } catch (const UsageError& e) {
    // "--seq-len must be at least 1, got -5": a flag the user did not give came from the
    // checkpoint, and the message says so.
    const std::string message = e.what();
    const std::size_t end = message.find(' ');
    const std::string flag = message.starts_with("--") ? message.substr(2, end - 2) : "";
    if (flag.empty() || given.count(flag)) throw;
    for (const std::string& key : {"config." + flag, "run." + flag})
      if (const auto it = m.find(key); it != m.end())
        throw UsageError(xgrad::str(source, ": the checkpoint's ", key, " = '", one_line(it->second),
                                    "' cannot be used:", message.substr(end)));
    throw;
  }
}

void apply_model_metadata(const Metadata& m, Config& c, const std::set<std::string>& given) {
  check_agreement(m, model_settings(c), given);
  if (m.at("config.task") == "lm" && !c.language_model()) {
    c.task = "lm";
    apply_language_model_defaults(c, given);
  }
  read_model_settings(m, c);
}

void add_progress(Metadata& m, const Progress& p) {
  m["step"] = std::to_string(p.step);
  m["wall_s"] = exact_text(p.wall_s);
  m["train_s"] = exact_text(p.train_s);
  if (const auto& e = p.evaluation) {
    m["eval.train_loss"] = exact_text(e->train_loss);
    m["eval.val_loss"] = exact_text(e->val_loss);
    if (e->token_acc) m["eval.token_acc"] = exact_text(*e->token_acc);
    if (e->exact_match) m["eval.exact_match"] = exact_text(*e->exact_match);
  }
  if (p.best_val_loss) m["best_val_loss"] = exact_text(*p.best_val_loss);
  if (!p.curve.empty()) m["curve"] = curve_to_text(p.curve);
  m["recent_loss_sum"] = exact_text(p.recent_loss_sum);
  m["recent_steps"] = std::to_string(p.recent_steps);
  m["reached_target"] = p.reached_target ? "true" : "false";
}

Progress read_progress(const Metadata& m, const std::string& source) {
  const auto entry = [&](const char* key) -> const std::string* {
    const auto it = m.find(key);
    return it == m.end() ? nullptr : &it->second;
  };
  const auto damaged = [&](const char* key, const std::string& text, const std::string& expected) {
    return UsageError(xgrad::str(source, ": the checkpoint's ", key, " = '", one_line(text), "' is not ", expected));
  };
  Progress p;
  const std::string* step = entry("step");
  if (!step) throw UsageError(source + ": the checkpoint has no step (not written by xgrad-train?)");
  const std::optional<std::int64_t> parsed_step = parse_whole<std::int64_t>(*step);
  if (!parsed_step || *parsed_step < 0) throw damaged("step", *step, "a whole number >= 0");
  p.step = *parsed_step;
  // Losses may be NaN (--allow-nonfinite) and are kept as they are; times and fractions
  // may not.
  const auto real = [&](const char* key, double least, double most, bool nan_allowed) -> std::optional<double> {
    const std::string* text = entry(key);
    if (!text) return std::nullopt;
    const std::optional<double> v = parse_real(*text);
    if (!v || !((nan_allowed && std::isnan(*v)) || (*v >= least && *v <= most)))
      throw damaged(key, *text, xgrad::str("a number in [", least, ", ", most, "]", nan_allowed ? " or nan" : ""));
    return v;
  };
  const double inf = std::numeric_limits<double>::infinity();
  p.wall_s = real("wall_s", 0, 1e12, false).value_or(0.0);
  p.train_s = real("train_s", 0, 1e12, false).value_or(0.0);
  const std::optional<double> train_loss = real("eval.train_loss", 0, inf, true),
                              val_loss = real("eval.val_loss", 0, inf, true);
  if (train_loss && val_loss)
    p.evaluation =
        Evaluation{*train_loss, *val_loss, real("eval.token_acc", 0, 1, false), real("eval.exact_match", 0, 1, false)};
  p.best_val_loss = real("best_val_loss", 0, inf, false);
  p.recent_loss_sum = real("recent_loss_sum", 0, inf, true).value_or(0.0);
  if (const std::string* recent = entry("recent_steps")) {
    const std::optional<std::int64_t> steps = parse_whole<std::int64_t>(*recent);
    if (!steps || *steps < 0 || *steps > p.step) throw damaged("recent_steps", *recent, "a whole number in [0, step]");
    p.recent_steps = *steps;
  }
  if (const std::string* curve = entry("curve")) {
    std::optional<std::vector<CurvePoint>> points = curve_from_text(*curve);
    if (!points) throw damaged("curve", *curve, "lines of step, train loss and validation loss");
    p.curve = std::move(*points);
  }
  if (const std::string* reached = entry("reached_target")) {
    if (*reached != "true" && *reached != "false") throw damaged("reached_target", *reached, "true or false");
    p.reached_target = *reached == "true";
  }
  // The entries must agree with each other, as a run writes them.
  const auto contradiction = [&](const std::string& what) {
    return UsageError(source + ": the checkpoint contradicts itself: " + what);
  };
  std::int64_t previous = -1;
  for (const CurvePoint& point : p.curve) {
    if (point.step <= previous || point.step > p.step)
      throw contradiction(xgrad::str("its curve has an evaluation at step ", point.step,
                                     previous >= 0 ? xgrad::str(" after one at step ", previous) : std::string(),
                                     " in a run at step ", p.step));
    previous = point.step;
  }
  if (p.evaluation && p.curve.empty())
    throw contradiction("it holds an evaluation (eval.val_loss) but no curve of evaluations");
  if (p.reached_target && !p.evaluation)
    throw contradiction("reached_target = true without an evaluation (eval.val_loss)");
  if (p.best_val_loss) {
    const bool found = std::any_of(p.curve.begin(), p.curve.end(),
                                   [&](const CurvePoint& point) { return point.val_loss == *p.best_val_loss; });
    const bool lowest = std::all_of(p.curve.begin(), p.curve.end(), [&](const CurvePoint& point) {
      return std::isnan(point.val_loss) || point.val_loss >= *p.best_val_loss;
    });
    if (!found || !lowest)
      throw contradiction(
          xgrad::str("best_val_loss = ", *p.best_val_loss, " is not the lowest validation loss of its curve"));
  }
  return p;
}

}  // namespace tools
