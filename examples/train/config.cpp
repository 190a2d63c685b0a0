#include "config.hpp"

#include <CLI/CLI.hpp>

#include <sstream>

#include "autograd/blas.hpp"
#include "autograd/error.hpp"
#include "autograd/parallel.hpp"

namespace train {

namespace {

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
  app.add_option("--task", c.task, "copy | reverse | sort (ascending) | add (digit-wise, least significant first)")
      ->check(CLI::IsMember({"copy", "reverse", "sort", "add"}))
      ->capture_default_str();
  app.add_option("--seq-len", c.seq_len, "tokens per sequence")->capture_default_str();
  app.add_option("--vocab", c.vocab, "tokens are 0 .. vocab-1 (the digit base for add)")->capture_default_str();
  app.add_option("--d-model", c.d_model, "model width")->capture_default_str();
  app.add_option("--heads", c.heads, "attention heads (must divide d-model)")->capture_default_str();
  app.add_option("--layers", c.layers, "encoder layers")->capture_default_str();
  app.add_option("--ff", c.ff, "feed-forward width (0: 4 x d-model)")->capture_default_str();
  app.add_option("--dropout", c.dropout, "dropout in every layer, [0, 1)")->capture_default_str();
  app.add_option("--positions", c.positions, "learned | sinusoidal")
      ->check(CLI::IsMember({"learned", "sinusoidal"}))
      ->capture_default_str();
  app.add_option("--batch", c.batch, "sequences per step")->capture_default_str();
  app.add_option("--steps", c.steps, "most training steps")->capture_default_str();
  app.add_option("--lr", c.lr, "learning rate")->capture_default_str();
  app.add_option("--optimizer", c.optimizer, "adam | adamw | sgd (momentum 0.9)")
      ->check(CLI::IsMember({"adam", "adamw", "sgd"}))
      ->capture_default_str();
  app.add_option("--schedule", c.schedule, "constant | cosine (to 0 at --steps) | noam | step (x0.5 every steps/4)")
      ->check(CLI::IsMember({"constant", "cosine", "noam", "step"}))
      ->capture_default_str();
  app.add_option("--warmup", c.warmup, "warmup steps for cosine and noam")->capture_default_str();
  app.add_option("--clip", c.clip, "clip the gradient norm to this (0: off)")->capture_default_str();
  app.add_option("--seed", c.seed, "seed for the model, the data and dropout")->capture_default_str();
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
  app.footer("Runs on " + xgrad::blas_summary() + ", " + std::to_string(xgrad::num_threads()) + " threads.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    app.exit(e);
    return false;
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  for (const CLI::Option* option : app.get_options())
    if (option->count() > 0) given.insert(option->get_name().substr(2));
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
  const auto get = [&](const char* flag) { return m.at(std::string("config.") + flag); };
  try {
    c.task = get("task"), c.positions = get("positions"), c.optimizer = get("optimizer"), c.schedule = get("schedule");
    c.seq_len = std::stoi(get("seq-len")), c.vocab = std::stoi(get("vocab")), c.d_model = std::stoi(get("d-model"));
    c.heads = std::stoi(get("heads")), c.layers = std::stoi(get("layers")), c.ff = std::stoi(get("ff"));
    c.dropout = std::stod(get("dropout")), c.batch = std::stoi(get("batch")), c.lr = std::stod(get("lr"));
    c.warmup = std::stoi(get("warmup")), c.clip = std::stod(get("clip")), c.seed = std::stoull(get("seed"));
    const auto carry = [&](const char* flag, auto& field, auto parse) {
      const auto it = m.find(std::string("run.") + flag);
      if (it != m.end() && !given.count(flag)) field = parse(it->second);
    };
    const auto to_int = [](const std::string& s) { return std::stoi(s); };
    const auto to_double = [](const std::string& s) { return std::stod(s); };
    carry("steps", c.steps, to_int);
    carry("eval-every", c.eval_every, to_int);
    carry("eval-size", c.eval_size, to_int);
    carry("target-exact", c.target_exact, to_double);
  } catch (const std::logic_error&) {
    throw UsageError("the checkpoint's settings are unreadable");
  }
}

}  // namespace train
