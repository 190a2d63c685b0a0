#include "config.hpp"

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <optional>
#include <sstream>

#include "xgrad/autograd/blas.hpp"
#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/autograd/version.hpp"

namespace train {

namespace {

const std::set<std::string> kTasks = {"copy", "reverse", "sort", "add"};
const std::set<std::string> kPositions = {"learned", "sinusoidal"};
const std::set<std::string> kOptimizers = {"adam", "adamw", "sgd"};
const std::set<std::string> kSchedules = {"constant", "cosine", "noam", "step"};

// Whole decimal numbers only: "010" is ten (never octal eight), and text around the
// digits or a value out of the type's range is refused rather than cut or clamped.
template <class Int>
std::optional<Int> parse_whole(const std::string& text) {
  Int value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> parse_real(const std::string& text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Rewrites a whole number to plain decimal before CLI11 converts it (CLI11 reads a
// leading 0 as octal and clamps what overflows).
template <class Int>
CLI::Validator whole_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::optional<Int> value = parse_whole<Int>(text);
        if (!value) return "'" + text + "' is not a whole number in range";
        text = std::to_string(*value);
        return {};
      },
      "");
}

// Every learning setting by flag name, as text (what checkpoints store).
std::map<std::string, std::string> learning_settings(const Config& c) {
  std::ostringstream lr, dropout, clip;
  lr.precision(17);
  dropout.precision(17);
  clip.precision(17);
  lr << c.lr;
  dropout << c.dropout;
  clip << c.clip;
  return {{"task", c.task},
          {"seq-len", std::to_string(c.seq_len)},
          {"vocab", std::to_string(c.vocab)},
          {"d-model", std::to_string(c.d_model)},
          {"heads", std::to_string(c.heads)},
          {"layers", std::to_string(c.layers)},
          {"ff", std::to_string(c.ff_width())},
          {"dropout", dropout.str()},
          {"positions", c.positions},
          {"batch", std::to_string(c.batch)},
          {"lr", lr.str()},
          {"optimizer", c.optimizer},
          {"schedule", c.schedule},
          {"warmup", std::to_string(c.warmup)},
          {"clip", clip.str()},
          {"seed", std::to_string(c.seed)}};
}

}  // namespace

bool parse_command_line(int argc, char** argv, Config& c, std::set<std::string>& given) {
  CLI::App app{
      "xgrad-train: trains a small transformer encoder on a toy sequence task.\n"
      "Example: xgrad-train --task reverse --seq-len 8 --steps 500"};
  app.get_formatter()->column_width(30);
  const CLI::Validator whole = whole_number<int>();
  app.add_option("--task", c.task, "copy | reverse | sort (ascending) | add (digit-wise, least significant first)")
      ->check(CLI::IsMember(kTasks))
      ->capture_default_str();
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
  app.add_option("--lr", c.lr, "learning rate")->capture_default_str();
  app.add_option("--optimizer", c.optimizer, "adam | adamw | sgd (momentum 0.9)")
      ->check(CLI::IsMember(kOptimizers))
      ->capture_default_str();
  app.add_option("--schedule", c.schedule, "constant | cosine (to 0 at --steps) | noam | step (x0.5 every steps/4)")
      ->check(CLI::IsMember(kSchedules))
      ->capture_default_str();
  app.add_option("--warmup", c.warmup, "warmup steps for cosine and noam")->capture_default_str();
  app.add_option("--clip", c.clip, "clip the gradient norm to this (0: off)")->capture_default_str();
  app.add_option("--seed", c.seed, "seed for the model, the data and dropout")
      ->transform(whole_number<std::uint64_t>())
      ->capture_default_str();
  app.add_option("--threads", c.threads, "threads (0: every core)")->capture_default_str();
  app.add_option("--eval-every", c.eval_every, "evaluate every this many steps")->capture_default_str();
  app.add_option("--eval-size", c.eval_size, "held-out sequences per evaluation")->capture_default_str();
  app.add_option("--target-exact", c.target_exact, "stop once exact-match reaches this (above 1: never)")
      ->capture_default_str();
  app.add_option("--save", c.save, "write a checkpoint here at every evaluation, at the end and on Ctrl-C");
  app.add_option("--resume", c.resume, "continue from this checkpoint");
  app.add_option("--metrics", c.metrics, "append JSON lines of every evaluation here");
  app.add_option("--attention-png", c.attention_png, "draw the last layer's attention maps to this PNG");
  app.add_flag("--quiet", c.quiet, "print only the final summary");
  app.add_flag("--verbose", c.verbose, "first print the BLAS kernels and threads in use");
  app.add_flag("--allow-nonfinite", c.allow_nonfinite, "keep training after a NaN or infinite loss (default: stop)");
  for (const char* flag : {"--seq-len", "--vocab", "--d-model", "--heads", "--layers", "--ff", "--batch", "--steps",
                           "--warmup", "--threads", "--eval-every", "--eval-size"})
    app.get_option(flag)->transform(whole);
  app.set_version_flag("--version", xgrad::str("xgrad-train ", xgrad::version(), " (", xgrad::blas_summary(), ")"));
  app.footer("Runs on " + xgrad::blas_summary() + ", " + std::to_string(xgrad::num_threads()) + " threads.");
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
                                   {"metrics", c.metrics},
                                   {"attention-png", c.attention_png}})
    if (given.count(flag) && path.empty()) throw UsageError(xgrad::str("--", flag, " needs a file name, got \"\""));
  return true;
}

void validate(const Config& c) {
  const auto positive = [](const char* flag, long long v) {
    if (v < 1) throw UsageError(xgrad::str("--", flag, " must be at least 1, got ", v));
  };
  positive("seq-len", c.seq_len);
  positive("vocab", c.vocab);
  positive("d-model", c.d_model);
  positive("heads", c.heads);
  positive("layers", c.layers);
  positive("batch", c.batch);
  positive("steps", c.steps);
  positive("eval-every", c.eval_every);
  positive("eval-size", c.eval_size);
  if (c.d_model % c.heads != 0)
    throw UsageError(xgrad::str("--heads ", c.heads, " does not divide --d-model ", c.d_model));
  if (c.ff < 0 || c.warmup < 0 || c.threads < 0) throw UsageError("--ff, --warmup and --threads cannot be negative");
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
  const auto finite = [](const char* flag, double v) {
    if (!std::isfinite(v)) throw UsageError(xgrad::str("--", flag, " must be a finite number, got ", v));
  };
  finite("dropout", c.dropout);
  finite("lr", c.lr);
  finite("clip", c.clip);
  finite("target-exact", c.target_exact);
  if (!(c.dropout >= 0 && c.dropout < 1)) throw UsageError("--dropout must lie in [0, 1)");
  if (!(c.lr > 0)) throw UsageError("--lr must be positive");
  if (!(c.clip >= 0)) throw UsageError("--clip cannot be negative");
  if (c.task == "add" && (c.seq_len < 2 || c.vocab < 2))
    throw UsageError("--task add needs --seq-len >= 2 and --vocab >= 2 (two numbers, digits in base vocab)");
  if (c.schedule == "cosine" && c.warmup >= c.steps) throw UsageError("--warmup must be below --steps for cosine");
  if (c.schedule == "noam" && c.warmup < 1) throw UsageError("--schedule noam needs --warmup >= 1");
}

// The run's own settings: carried over on --resume unless given again.
std::map<std::string, std::string> run_settings(const Config& c) {
  std::ostringstream target;
  target.precision(17);
  target << c.target_exact;
  return {{"steps", std::to_string(c.steps)},
          {"eval-every", std::to_string(c.eval_every)},
          {"eval-size", std::to_string(c.eval_size)},
          {"target-exact", target.str()}};
}

Metadata to_metadata(const Config& c) {
  Metadata m;
  for (const auto& [flag, value] : learning_settings(c)) m["config." + flag] = value;
  for (const auto& [flag, value] : run_settings(c)) m["run." + flag] = value;
  return m;
}

void apply_metadata(const Metadata& m, Config& c, const std::set<std::string>& given) {
  const std::map<std::string, std::string> asked = learning_settings(c);
  for (const auto& [flag, value] : asked) {
    const auto it = m.find("config." + flag);
    if (it == m.end())
      throw UsageError("the checkpoint has no setting for --" + flag + " (not written by xgrad-train?)");
    if (given.count(flag) && it->second != value)
      throw UsageError("the checkpoint is from another config: --" + flag + " " + value + " here, " + it->second +
                       " in the checkpoint");
  }
  // Each value read strictly; a damaged one is named with what it holds.
  const auto read = [&](const std::string& key, auto& field) {
    using Field = std::decay_t<decltype(field)>;
    const std::string& text = m.at(key);
    if constexpr (std::is_same_v<Field, std::string>) {
      field = text;
    } else {
      const std::optional<Field> value = [&] {
        if constexpr (std::is_same_v<Field, double>)
          return parse_real(text);
        else
          return parse_whole<Field>(text);
      }();
      if (!value)
        throw UsageError(xgrad::str("the checkpoint's ", key, " = '", text, "' is not ",
                                    std::is_same_v<Field, double> ? "a number" : "a whole number in range"));
      field = *value;
    }
  };
  const auto learned = [&](const char* flag, auto& field) { read(std::string("config.") + flag, field); };
  learned("task", c.task), learned("positions", c.positions), learned("optimizer", c.optimizer);
  learned("schedule", c.schedule), learned("seq-len", c.seq_len), learned("vocab", c.vocab);
  learned("d-model", c.d_model), learned("heads", c.heads), learned("layers", c.layers), learned("ff", c.ff);
  learned("dropout", c.dropout), learned("batch", c.batch), learned("lr", c.lr), learned("warmup", c.warmup);
  learned("clip", c.clip), learned("seed", c.seed);
  const auto carry = [&](const char* flag, auto& field) {
    const std::string key = std::string("run.") + flag;
    if (m.count(key) && !given.count(flag)) read(key, field);
  };
  carry("steps", c.steps);
  carry("eval-every", c.eval_every);
  carry("eval-size", c.eval_size);
  carry("target-exact", c.target_exact);
}

void add_progress(Metadata& m, const Progress& p) {
  const auto exact = [](double v) {
    std::ostringstream text;
    text.precision(17);
    text << v;
    return text.str();
  };
  m["step"] = std::to_string(p.step);
  m["elapsed_s"] = exact(p.elapsed_s);
  if (p.token_acc) m["eval.token_acc"] = exact(*p.token_acc);
  if (p.exact_match) m["eval.exact_match"] = exact(*p.exact_match);
  m["reached_target"] = p.reached_target ? "true" : "false";
}

Progress read_progress(const Metadata& m) {
  const auto entry = [&](const char* key) -> const std::string* {
    const auto it = m.find(key);
    return it == m.end() ? nullptr : &it->second;
  };
  const auto damaged = [](const char* key, const std::string& text, const char* expected) {
    return UsageError(xgrad::str("--resume: the checkpoint's ", key, " = '", text, "' is not ", expected));
  };
  Progress p;
  const std::string* step = entry("step");
  if (!step) throw UsageError("--resume: the checkpoint has no step (not written by xgrad-train?)");
  const std::optional<std::int64_t> parsed_step = parse_whole<std::int64_t>(*step);
  if (!parsed_step || *parsed_step < 0) throw damaged("step", *step, "a whole number >= 0");
  p.step = *parsed_step;
  const auto real = [&](const char* key, double least, double most) -> std::optional<double> {
    const std::string* text = entry(key);
    if (!text) return std::nullopt;
    const std::optional<double> v = parse_real(*text);
    if (!v || !(*v >= least && *v <= most)) throw damaged(key, *text, "a number in range");
    return v;
  };
  p.elapsed_s = real("elapsed_s", 0, 1e12).value_or(0.0);
  p.token_acc = real("eval.token_acc", 0, 1);
  p.exact_match = real("eval.exact_match", 0, 1);
  if (const std::string* reached = entry("reached_target")) {
    if (*reached != "true" && *reached != "false") throw damaged("reached_target", *reached, "true or false");
    p.reached_target = *reached == "true";
  }
  return p;
}

}  // namespace train
