// xgrad-train: trains a transformer encoder on a toy sequence task from the command line,
// with held-out evaluation, metrics, checkpoints and resume, and a picture of what the
// attention learned. `xgrad-train --help` lists the flags.

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "config.hpp"
#include "display.hpp"
#include "model.hpp"
#include "preflight.hpp"
#include "tasks.hpp"
#include "xgrad/autograd/blas.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/autograd/version.hpp"
#include "xgrad/optim/optim.hpp"

using namespace xgrad;
using namespace train;

namespace {

// Ctrl-C or SIGTERM: the loop saves and exits at the next step or evaluation chunk; a
// second signal exits at once (the checkpoint on disk is always whole: it is replaced
// atomically).
volatile std::sig_atomic_t interrupted = 0;
void on_interrupt(int signal) {
  if (interrupted) ::_exit(128 + signal);
  interrupted = signal;
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

ModelOptions model_options(const Config& c) {
  const auto size = [](int v) { return static_cast<std::size_t>(v); };
  return {.vocab = size(c.vocab),
          .seq_len = size(c.seq_len),
          .d_model = size(c.d_model),
          .heads = size(c.heads),
          .layers = size(c.layers),
          .ff_width = size(c.ff_width()),
          .dropout = c.dropout,
          .learned_positions = c.positions == "learned"};
}

std::unique_ptr<optim::Optimizer> make_optimizer(const Config& c, const nn::Module& model) {
  if (c.optimizer == "sgd")
    return std::make_unique<optim::SGD>(model.named_parameters(), optim::SGDOptions{.lr = c.lr, .momentum = 0.9});
  if (c.optimizer == "adamw")
    return std::make_unique<optim::AdamW>(model.named_parameters(), optim::AdamWOptions{.lr = c.lr});
  return std::make_unique<optim::Adam>(model.named_parameters(), optim::AdamOptions{.lr = c.lr});
}

std::unique_ptr<optim::LRSchedule> make_schedule(const Config& c, optim::Optimizer& opt) {
  if (c.schedule == "cosine") return std::make_unique<optim::WarmupCosineLR>(opt, c.warmup, c.steps);
  if (c.schedule == "step") return std::make_unique<optim::StepLR>(opt, std::max(1, c.steps / 4), 0.5);
  if (c.schedule == "noam") {
    // Scaled so that the peak (at the end of warmup) is --lr.
    const double peak = std::pow(c.d_model, -0.5) * std::pow(c.warmup, -0.5);
    opt.set_lr(c.lr / peak);
    return std::make_unique<optim::NoamLR>(opt, static_cast<std::size_t>(c.d_model), c.warmup);
  }
  return std::make_unique<optim::ConstantLR>(opt);
}

struct Score {
  double token_acc = 0, exact_match = 0;
};

std::vector<std::int64_t> argmax_rows(const Tensor& logits, std::size_t classes) {
  const std::vector<double> z = logits.to_vector();
  std::vector<std::int64_t> best(z.size() / classes);
  for (std::size_t r = 0; r < best.size(); ++r)
    best[r] = std::max_element(z.begin() + static_cast<std::ptrdiff_t>(r * classes),
                               z.begin() + static_cast<std::ptrdiff_t>((r + 1) * classes)) -
              (z.begin() + static_cast<std::ptrdiff_t>(r * classes));
  return best;
}

// Greedy prediction at every position of `size` fresh held-out sequences; nothing when a
// signal arrives first.
std::optional<Score> evaluate(SequenceModel& model, const Config& c, std::int64_t step) {
  NoGradGuard no_grad;
  model.eval();
  Generator gen = stream_generator(c.seed, 2, static_cast<std::uint64_t>(step));
  const auto L = static_cast<std::size_t>(c.seq_len), vocab = static_cast<std::size_t>(c.vocab);
  std::size_t tokens = 0, correct_tokens = 0, exact = 0;
  for (std::size_t done = 0; done < static_cast<std::size_t>(c.eval_size);) {
    if (interrupted) {
      model.train();
      return std::nullopt;
    }
    const std::size_t n = std::min<std::size_t>(500, static_cast<std::size_t>(c.eval_size) - done);
    const Batch b = make_batch(c.task, n, L, vocab, gen);
    const std::vector<std::int64_t> predicted = argmax_rows(model.forward(b.inputs), vocab);
    for (std::size_t r = 0; r < n; ++r) {
      bool all = true;
      for (std::size_t i = r * L; i < (r + 1) * L; ++i) {
        if (b.targets.values[i] == kIgnore) continue;
        ++tokens;
        const bool right = predicted[i] == b.targets.values[i];
        correct_tokens += right;
        all = all && right;
      }
      exact += all;
    }
    done += n;
  }
  model.train();
  return Score{static_cast<double>(correct_tokens) / static_cast<double>(tokens),
               static_cast<double>(exact) / static_cast<double>(c.eval_size)};
}

void save_checkpoint(const Config& c, const SequenceModel& model, const optim::Optimizer& opt,
                     const Progress& progress) {
  nn::Metadata meta = to_metadata(c);
  add_progress(meta, progress);
  meta["written_by"] = "xgrad-train";
  nn::save(c.save, model, &opt, meta);
}

// A JSON number, or null when absent or not finite (JSON has no NaN).
// One line appended to the metrics file, checked: a full disk is an error, not a
// silently empty file.
void write_line(std::ofstream& out, const Config& c, const std::string& line) {
  out << line << '\n';
  out.flush();
  if (!out) throw UsageError(str("--metrics ", c.metrics, ": writing failed (", std::strerror(errno), ")"));
}

std::string json_or_null(bool present, double value, const char* format) {
  if (!present || !std::isfinite(value)) return "null";
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

// Three held-out samples, and the last layer's attention on the first of them.
void show_what_was_learned(SequenceModel& model, const Config& c, std::ostream& os) {
  NoGradGuard no_grad;
  model.eval();
  const auto L = static_cast<std::size_t>(c.seq_len), vocab = static_cast<std::size_t>(c.vocab);
  Generator gen = stream_generator(c.seed, 4, 0);
  const Batch samples = make_batch(c.task, 3, L, vocab, gen);
  const std::vector<std::int64_t> predicted = argmax_rows(model.forward(samples.inputs), vocab);
  os << "\nheld-out samples:\n";
  const auto row = [&](const std::vector<std::int64_t>& v, std::size_t r) {
    return std::vector<std::int64_t>(v.begin() + static_cast<std::ptrdiff_t>(r * L),
                                     v.begin() + static_cast<std::ptrdiff_t>((r + 1) * L));
  };
  for (std::size_t r = 0; r < 3; ++r) {
    print_sample(os, row(samples.inputs.values, r), row(predicted, r), row(samples.targets.values, r), vocab, kIgnore);
    os << "\n";
  }
  auto& attention = *model.last_layer().self_attn;
  attention.set_keep_attention(true);
  const std::vector<std::int64_t> first = row(samples.inputs.values, 0);
  model.forward(Indices(first, {1, L}));
  const Tensor maps = squeeze(attention.last_attention(), 0);  // [H, L, L]
  attention.set_keep_attention(false);
  os << "attention in the last layer for the first sample (rows: queries, each scaled to its maximum):\n";
  print_attention(os, maps, first, vocab);
  if (!c.attention_png.empty()) {
    write_attention_png(c.attention_png, maps);
    os << "wrote the attention maps to " << c.attention_png << "\n";
  }
}

int run(int argc, char** argv) {
  Config c;
  std::set<std::string> given;
  if (!parse_command_line(argc, argv, c, given)) return 0;
  Progress resumed;
  if (!c.resume.empty()) {
    if (!std::filesystem::exists(c.resume)) throw UsageError("--resume " + c.resume + ": no such file");
    nn::Metadata meta;
    try {
      meta = nn::read_safetensors(c.resume).metadata;
    } catch (const Error& e) {
      throw UsageError(std::string("--resume: ") + e.what());
    }
    apply_metadata(meta, c, given);
    resumed = read_progress(meta);
  }
  const std::int64_t start_step = resumed.step;
  const double elapsed_before = resumed.elapsed_s;
  validate(c);
  check_memory(c);
  check_outputs(c);
  if (c.threads > 0) set_num_threads(c.threads);
  if (c.verbose)
    std::cout << "xgrad-train: BLAS " << blas_summary() << ", " << num_threads() << " threads" << std::endl;

  manual_seed(c.seed);
  SequenceModel model(model_options(c));
  std::unique_ptr<optim::Optimizer> opt = make_optimizer(c, model);
  std::unique_ptr<optim::LRSchedule> schedule = make_schedule(c, *opt);
  if (!c.resume.empty()) {
    try {
      nn::load(c.resume, model, opt.get());
    } catch (const Error& e) {
      throw UsageError(std::string("--resume: the checkpoint does not fit this model: ") + e.what());
    }
    schedule->set_updates(start_step);
  }
  // A finished run (all its steps, or the target reached) is reported, and nothing is
  // written: its checkpoint, metrics and picture stay as they are.
  const bool target_met = resumed.reached_target && resumed.exact_match && *resumed.exact_match >= c.target_exact;
  if (!c.resume.empty() && (start_step >= c.steps || target_met)) {
    std::optional<Score> score;
    if (resumed.exact_match && resumed.token_acc) score = Score{*resumed.token_acc, *resumed.exact_match};
    if (!score) score = evaluate(model, c, start_step);
    if (!score) return 128 + interrupted;
    std::printf(
        "%s: exact-match %.4f at step %lld, %s; the run is finished (nothing to do: raise --steps%s to go on)\n",
        c.task.c_str(), score->exact_match, static_cast<long long>(start_step),
        target_met ? "the target was reached" : "its last step", target_met ? " and --target-exact" : "");
    return 0;
  }
  std::ofstream metrics;
  if (!c.metrics.empty()) {
    metrics.open(c.metrics, c.resume.empty() ? std::ios::trunc : std::ios::app);
    if (!metrics) throw UsageError("--metrics " + c.metrics + ": cannot open for writing");
  }
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);

  const bool terminal = ::isatty(::fileno(stdout)) && !c.quiet;
  ProgressLine progress(terminal);
  const auto L = static_cast<std::size_t>(c.seq_len), vocab = static_cast<std::size_t>(c.vocab);
  if (!c.quiet)
    std::cout << "xgrad-train: " << c.task << ", seq-len " << c.seq_len << ", vocab " << c.vocab << ", "
              << model.num_parameters() << " parameters, " << num_threads() << " threads"
              << (start_step ? ", resuming at step " + std::to_string(start_step) : std::string()) << std::endl;

  const Clock::time_point started = Clock::now();
  Clock::time_point last_shown = started;
  std::optional<std::int64_t> reached_step;
  double reached_seconds = 0, last_loss = 0;
  Score last_score;
  std::int64_t step = start_step;
  while (step < c.steps) {
    ++step;
    manual_seed(stream_generator(c.seed, 3, static_cast<std::uint64_t>(step)).next_u64());  // dropout
    Generator data = stream_generator(c.seed, 1, static_cast<std::uint64_t>(step));
    const Batch batch = make_batch(c.task, static_cast<std::size_t>(c.batch), L, vocab, data);
    opt->zero_grad();
    Tensor loss = cross_entropy(model.forward(batch.inputs), batch.targets, kIgnore);
    loss.backward();
    if (c.clip > 0) optim::clip_grad_norm(model.parameters(), c.clip);
    last_loss = loss.item();
    if (!std::isfinite(last_loss) && !c.allow_nonfinite)  // before the update: the checkpoint stays good
      throw UsageError(str("step ", step, ": the loss is ", last_loss,
                           "; training diverged (lower --lr, or pass --allow-nonfinite to go on)"));
    opt->step();
    schedule->step();

    const double trained = seconds_since(started);
    const double tokens_per_second = static_cast<double>((step - start_step) * c.batch * c.seq_len) / trained;
    if (terminal && std::chrono::duration<double>(Clock::now() - last_shown).count() > 0.1) {
      progress.show(static_cast<int>(step), c.steps, last_loss, tokens_per_second,
                    trained / static_cast<double>(step - start_step) * static_cast<double>(c.steps - step));
      last_shown = Clock::now();
    }
    if (!interrupted && (step % c.eval_every == 0 || step == c.steps)) {
      const std::optional<Score> score = evaluate(model, c, step);
      if (!score) break;  // a signal: saved below
      last_score = *score;
      const double elapsed = elapsed_before + seconds_since(started);
      progress.clear();
      if (!c.quiet)
        std::printf("step %lld/%d  loss %.4f  token acc %.4f  exact-match %.4f  (%.1f s)\n",
                    static_cast<long long>(step), c.steps, last_loss, last_score.token_acc, last_score.exact_match,
                    elapsed);
      if (metrics.is_open())
        write_line(metrics, c,
                   str("{\"step\": ", step, ", \"loss\": ", json_or_null(true, last_loss, "%.5f"),
                       ", \"token_acc\": ", json_or_null(true, last_score.token_acc, "%.4f"),
                       ", \"exact_match\": ", json_or_null(true, last_score.exact_match, "%.4f"),
                       ", \"elapsed_s\": ", json_or_null(true, elapsed, "%.2f"), "}"));
      const bool reached = last_score.exact_match >= c.target_exact;
      if (!c.save.empty())
        save_checkpoint(c, model, *opt, {step, elapsed, last_score.token_acc, last_score.exact_match, reached});
      if (reached) {
        reached_step = step;
        reached_seconds = elapsed;
        break;
      }
    }
    if (interrupted) break;
  }
  if (interrupted) {
    progress.clear();
    if (c.save.empty()) {
      std::cout << "interrupted at step " << step << " (no --save given, nothing kept)" << std::endl;
    } else {
      save_checkpoint(c, model, *opt, {step, elapsed_before + seconds_since(started), {}, {}, false});
      std::cout << "interrupted at step " << step << "; checkpoint saved: continue with --resume " << c.save
                << std::endl;
    }
    return 128 + interrupted;
  }
  progress.clear();
  const double elapsed = elapsed_before + seconds_since(started);
  if (!c.save.empty()) {
    Progress done{step, elapsed, {}, {}, reached_step.has_value()};
    if (reached_step || step % c.eval_every == 0 || step == c.steps)  // the last evaluation ran at this step
      done.token_acc = last_score.token_acc, done.exact_match = last_score.exact_match;
    save_checkpoint(c, model, *opt, done);
  }
  if (metrics.is_open())
    write_line(metrics, c,
               str("{\"final\": true, \"task\": \"", c.task, "\", \"impl\": \"xgrad-", version(),
                   "\", \"reached_target\": ", reached_step ? "true" : "false", ", \"steps_to_target\": ",
                   json_or_null(reached_step.has_value(), static_cast<double>(reached_step.value_or(0)), "%.0f"),
                   ", \"seconds_to_target\": ", json_or_null(reached_step.has_value(), reached_seconds, "%.2f"), "}"));

  if (reached_step)
    std::printf("%s: exact-match %.4f reached the target %.2f at step %lld in %.1f s\n", c.task.c_str(),
                last_score.exact_match, c.target_exact, static_cast<long long>(*reached_step), reached_seconds);
  else
    std::printf("%s: exact-match %.4f after %lld steps (target %.2f not reached) in %.1f s\n", c.task.c_str(),
                last_score.exact_match, static_cast<long long>(step), c.target_exact, elapsed);
  if (!c.quiet) {
    const double trained = seconds_since(started);
    std::printf("trained %lld steps here: %.2fM tokens at %.1fk tokens/s; final loss %.4f\n",
                static_cast<long long>(step - start_step),
                static_cast<double>((step - start_step) * c.batch * c.seq_len) / 1e6,
                static_cast<double>((step - start_step) * c.batch * c.seq_len) / trained / 1000.0, last_loss);
    show_what_was_learned(model, c, std::cout);
  } else if (!c.attention_png.empty()) {
    std::ostringstream ignored;
    show_what_was_learned(model, c, ignored);
  }
  return 0;
}

}  // namespace

// Every error is one line on stderr and exit status 2; a signal exits with 128 + its
// number after saving.
int main(int argc, char** argv) {
  try {
    const int status = run(argc, argv);
    // Output that could not be written (a full disk, a closed pipe) is an error too.
    std::cout.flush();
    if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) {
      std::fprintf(stderr, "xgrad-train: writing to standard output failed (%s)\n", std::strerror(errno));
      return 2;
    }
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xgrad-train: %s\n", e.what());
    return 2;
  }
}
