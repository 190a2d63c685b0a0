#include "trainer.hpp"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "finite.hpp"
#include "gpt.hpp"
#include "json.hpp"
#include "language_model.hpp"
#include "plot.hpp"
#include "report.hpp"
#include "signals.hpp"
#include "timeline.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/autograd/version.hpp"
#include "xgrad/nn/lora.hpp"
#include "xgrad/nn/profiler.hpp"

namespace tools {

using namespace xgrad;

namespace {

// A LoRA adapter's tensor (PEFT's names: "...q_proj.lora_A.weight").
bool is_adapter(const std::string& name) { return name.find(".lora_") != std::string::npos; }

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::unique_ptr<optim::Optimizer> make_optimizer(const Config& c, const nn::Module& model) {
  std::vector<optim::ParamGroup> groups = decay_groups(model, c.weight_decay);
  if (c.optimizer == "sgd")
    return std::make_unique<optim::SGD>(std::move(groups), optim::SGDOptions{.lr = c.lr, .momentum = 0.9});
  if (c.optimizer == "adamw")
    return std::make_unique<optim::AdamW>(std::move(groups), optim::AdamWOptions{.lr = c.lr, .beta2 = c.beta2});
  return std::make_unique<optim::Adam>(std::move(groups), optim::AdamOptions{.lr = c.lr, .beta2 = c.beta2});
}

std::unique_ptr<optim::LRSchedule> make_schedule(const Config& c, optim::Optimizer& opt) {
  if (c.schedule == "cosine") return std::make_unique<optim::WarmupCosineLR>(opt, c.warmup, c.steps, c.min_lr);
  if (c.schedule == "step") return std::make_unique<optim::StepLR>(opt, std::max(1, c.steps / 4), 0.5);
  if (c.schedule == "noam") {
    // Scaled so that the peak (at the end of warmup) is --lr.
    const double peak = std::pow(c.d_model, -0.5) * std::pow(c.warmup, -0.5);
    opt.set_lr(c.lr / peak);
    return std::make_unique<optim::NoamLR>(opt, static_cast<std::int64_t>(c.d_model), c.warmup);
  }
  return std::make_unique<optim::ConstantLR>(opt);
}

// The targets that end a run: exact-match (toy tasks) and the validation loss.
bool meets_target(const Evaluation& e, const Config& c) {
  return (e.exact_match && *e.exact_match >= c.target_exact) || (c.target_val_loss && e.val_loss <= *c.target_val_loss);
}

// Why the folder `path` given to `start_flag` (--resume or --init-from) is no place to
// start from, and what is.
std::string not_a_start(const Flag& start_flag, const std::string& path) {
  const std::filesystem::path adapter = std::filesystem::path(path) / nn::kAdapterConfigFile;
  if (start_flag.name() == flag(&Config::init_from).name() && std::filesystem::is_regular_file(adapter)) {
    std::string base;
    try {
      base = nn::read_adapter_config(adapter.string()).base_model_name_or_path;
    } catch (const Error&) {  // the folder's kind is the message; its fields do not matter here
    }
    if (std::any_of(base.begin(), base.end(), [](unsigned char ch) { return std::iscntrl(ch); })) base.clear();
    return str(" holds a LoRA adapter (", nn::kAdapterConfigFile, "), not a model: start from its base model",
               base.empty() ? "" : str(" (", base, ")"),
               ", a checkpoint or a Hugging Face folder with config.json, and train adapters with ",
               flag(&Config::lora), " N");
  }
  return start_flag.name() == flag(&Config::resume).name()
             ? str(" is a folder: a run resumes from the checkpoint file it saved (", flag(&Config::save), ")")
             : str(" is a folder without config.json: a run starts from a checkpoint file or a Hugging Face ",
                   "model folder (config.json, model.safetensors)");
}

}  // namespace

Start read_start(const Config& c) {
  Start start;
  // A Hugging Face directory is no checkpoint: the run starts fresh from its weights.
  if (c.resume.empty() && (c.init_from.empty() || is_hf_directory(c.init_from))) return start;
  start.resume = !c.resume.empty();
  start.flag = start.resume ? flag(&Config::resume) : flag(&Config::init_from);
  start.path = start.resume ? c.resume : c.init_from;
  check_input_exists(start.flag->dashed(), start.path);
  if (std::filesystem::is_directory(start.path))
    throw UsageError(str(*start.flag, " ", start.path, not_a_start(*start.flag, start.path)));
  try {
    start.contents = nn::read_safetensors(start.path);
  } catch (const Error& e) {
    throw UsageError(str(*start.flag, ": ", e.what()));
  }
  return start;
}

void check_size_flags(const Given& given, const Start& start) {
  if (!start.flag || !start.contents.metadata.count(kModelConfigKey)) return;  // a published model's checkpoint
  const models::ModelConfig config = recorded_model_config(start.contents.metadata, start.source());
  const auto* gpt2 = std::get_if<models::GPT2Config>(&config);
  const auto* llama = std::get_if<models::LlamaConfig>(&config);
  const auto& settings = settings_of<Config>();
  const std::vector<std::pair<std::string, std::size_t>> sizes = {
      {settings.key(&Config::d_model), gpt2 ? gpt2->n_embd : llama->hidden_size},
      {settings.key(&Config::layers), gpt2 ? gpt2->n_layer : llama->num_hidden_layers},
      {settings.key(&Config::heads), gpt2 ? gpt2->n_head : llama->num_attention_heads}};
  // Sized by a config.json, the run recorded the flags' defaults beside it.
  const bool recorded_by_flags = std::all_of(sizes.begin(), sizes.end(), [&](const auto& size) {
    const auto found = start.contents.metadata.find(size.first);
    return found != start.contents.metadata.end() && found->second == std::to_string(size.second);
  });
  if (recorded_by_flags) return;  // the flags are checked against the checkpoint as any
  for (const Flag& size : {flag(&Config::layers), flag(&Config::heads), flag(&Config::d_model), flag(&Config::ff)})
    if (given.count(size.name()))
      throw SettingError(size, str(" does nothing here: the model's sizes come from ", start.source(), "'s ",
                                   kModelConfigKey, " (a config.json's)"));
}

bool holds_adapters(const Start& start) {
  return start.flag && std::any_of(start.contents.tensors.begin(), start.contents.tensors.end(),
                                   [](const auto& named) { return is_adapter(named.first); });
}

void check_adapters(const Config& c, const Start& start) {
  const bool adapters = holds_adapters(start);
  if (c.eval_only && c.lora > 0 && !adapters)
    throw SettingError(
        flag(&Config::lora),
        str(" does nothing here: ", start.flag ? start.source() : str(flag(&Config::init_from), " ", c.init_from),
            " holds no adapters, and new ones (B = 0) leave the model as it is (", flag(&Config::eval_only),
            " trains none)"));
  const auto rank = start.contents.metadata.find(settings_of<Config>().key(&Config::lora));
  const bool known = rank != start.contents.metadata.end();
  if (adapters && c.lora == 0)
    throw UsageError(str(start.source(), ": the checkpoint holds LoRA adapters",
                         known ? str(" of rank ", rank->second) : std::string(), ": give ", flag(&Config::lora),
                         " to start from them, or xgrad-export it (which merges them) and start from the export"));
  if (adapters && !start.resume && known && rank->second != std::to_string(c.lora))
    throw SettingError(flag(&Config::lora), str(" ", c.lora, ": ", start.source(), " holds adapters of rank ",
                                                rank->second, " (give that rank to start from them)"));
}

// --profile: rank 0 records --profile-steps steps from the step after the warm-up (or
// sooner, in a short run), ended early by an evaluation or the run's end; then prints the
// table and writes the trace and the timeline.
class ProfileWindow {
 public:
  ProfileWindow(const Config& c, std::int64_t start_step, bool root)
      : c_(c),
        from_(c.profile.empty() || !root
                  ? -1
                  : start_step + 1 +
                        std::min<std::int64_t>(kProfileWarmupSteps,
                                               std::max<std::int64_t>(0, c.steps - start_step - 1))) {}
  void begin_step(std::int64_t step) {
    if (step == from_) profiler_.emplace();
  }
  // After a step's update; `last`: an evaluation or the end of the run comes next.
  void end_step(bool last, ProgressLine& live) {
    if (profiler_ && (++recorded_ == c_.profile_steps || last)) write(live);
  }
  // The run stopped: what was recorded, or why nothing was.
  void end_run(ProgressLine& live) {
    if (profiler_) write(live);
    if (from_ >= 0 && recorded_ == 0)
      std::cout << flag(&Config::profile) << ": the run stopped before step " << from_
                << ", where profiling was to begin; nothing written" << std::endl;
  }

 private:
  void write(ProgressLine& live) {
    live.clear();
    std::cout << "profile of " << recorded_ << " step" << (recorded_ == 1 ? "" : "s") << " (from step " << from_
              << "), written to " << profile_trace_path(c_.profile) << " and " << profile_timeline_path(c_.profile)
              << ":\n"
              << write_profile(*profiler_, c_.profile, flag(&Config::profile)) << std::flush;
    profiler_.reset();
  }

  const Config& c_;
  const std::int64_t from_;  // -1: no profile
  std::optional<Profiler> profiler_;
  int recorded_ = 0;
};

Trainer::Trainer(Config& c, const distributed::Communicator& communicator, std::unique_ptr<Workload> workload,
                 const Start& start)
    : c_(c), communicator_(communicator), workload_(std::move(workload)), model_(workload_->model()) {
  opt_ = make_optimizer(c, model_);
  schedule_ = make_schedule(c, *opt_);
  if (start.flag) load(start);
  if (c.micro_batches() > 1)
    reducer_ =
        std::make_unique<distributed::GradientReducer>(communicator_, model_, static_cast<std::size_t>(c.accum_steps));
}

Trainer::~Trainer() = default;

// The checkpoint's weights (and on --resume its optimizer, schedule and progress).
void Trainer::load(const Start& start) {
  // --init-from a checkpoint of the base model with --lora: its adapters start as
  // apply_lora made them (B = 0: the base's function), the rest comes from the file.
  nn::SafetensorsContents contents = start.contents;
  if (!start.resume && c_.lora > 0 &&
      std::none_of(contents.tensors.begin(), contents.tensors.end(),
                   [](const auto& named) { return is_adapter(named.first); }))
    for (const auto& [name, tensor] : model_.state_dict())
      if (is_adapter(name)) contents.tensors.emplace(name, tensor.clone());
  try {
    nn::load(contents, model_, start.resume ? opt_.get() : nullptr, start.path);
  } catch (const Error& e) {
    throw UsageError(str(*start.flag, ": the checkpoint does not fit this model: ", e.what()));
  }
  if (const std::optional<std::string> bad = first_nonfinite(model_); bad && !c_.allow_nonfinite)
    throw UsageError(str(start.source(), ": the tensor ", *bad, " holds NaN or infinite values (refusing it; ",
                         flag(&Config::allow_nonfinite), " goes on)"));
  if (!start.resume) return;
  progress_ = read_progress(start.contents.metadata, start.source());
  if (opt_->step_count() != progress_.step)
    throw UsageError(str(start.source(), ": the checkpoint contradicts itself: its step = ", progress_.step,
                         " but its optimizer state has made ", opt_->step_count(), " steps (optimizer.step)"));
  schedule_->set_updates(progress_.step);
}

void Trainer::save(const Progress& progress) const {
  if (c_.save.empty()) return;
  nn::Metadata meta = to_metadata(c_);
  add_progress(meta, progress);
  workload_->add_metadata(meta);
  meta["written_by"] = "xgrad-train";
  if (!c_.started_from.empty()) meta["init_from"] = c_.started_from;
  if (!c_.base_model.empty()) meta["base_model"] = c_.base_model;
  try {
    nn::save(c_.save, model_, opt_.get(), meta);
  } catch (const Error& e) {
    throw UsageError(str(flag(&Config::save), " ", c_.save, ": ", e.what()));
  }
}

void Trainer::save_at(std::int64_t step) const {
  Progress now = progress_;
  if (now.step != step) now.evaluation.reset();  // the last evaluation was at an earlier step
  now.step = step;
  now.wall_s = wall_s_before_ + seconds_since(started_);
  save(now);
}

// Opened at the first line: a run that fails before any evaluation leaves no file. A line
// that fails to be written (a full disk, ulimit -f) is cut off again, and a file this run
// made that holds nothing is removed.
void Trainer::write_metrics(const std::string& line) {
  if (c_.metrics.empty()) return;
  const bool first = !metrics_.is_open();
  if (first) {
    metrics_.open(c_.metrics, c_.resume.empty() ? std::ios::trunc : std::ios::app);
    if (!metrics_) throw UsageError(str(flag(&Config::metrics), " ", c_.metrics, ": cannot open for writing"));
  }
  std::error_code error;
  const std::uintmax_t before = std::filesystem::file_size(c_.metrics, error);
  try {
    write_line(metrics_, c_, line);
  } catch (const UsageError&) {
    metrics_.close();
    if (!error && before == 0 && first && c_.resume.empty())
      std::filesystem::remove(c_.metrics, error);
    else if (!error)
      std::filesystem::resize_file(c_.metrics, before, error);
    throw;
  }
}

void Trainer::announce() const {
  if (c_.quiet) return;
  std::cout << "xgrad-train: " << c_.task << ", " << workload_->sizes() << ", seq-len " << c_.seq_len << ", vocab "
            << c_.vocab << ", " << model_.num_parameters() << " parameters, " << num_threads()
            << (num_threads() == 1 ? " thread" : " threads")
            << (start_step_ ? ", resuming at step " + std::to_string(start_step_) : std::string()) << std::endl;
}

// --eval-only: the checkpoint's weights evaluated now, printed, and nothing written but
// the metrics line.
int Trainer::evaluate_only() {
  const std::optional<Evaluation> e = evaluate(progress_.step, recent_train_loss());
  if (!e) return 128 + interrupt_signal();
  std::printf("%s at step %lld: %s\n", c_.task.c_str(), static_cast<long long>(progress_.step),
              describe(*e, measures_train_loss()).c_str());
  // The rate as the run's own line at this step gave it (the one its last update used).
  const double lr = progress_.step > 0 ? schedule_->rate(progress_.step - 1) : opt_->lr();
  const std::string line = metrics_line(progress_.step, *e, lr, progress_.train_s, progress_.wall_s);
  std::printf("%s\n", line.c_str());
  write_metrics(line);
  return 0;
}

// A finished run (all its steps, or the target reached) is reported, and nothing is
// written but the exports given (--save-hf): its checkpoint, metrics and pictures stay
// as they are.
int Trainer::report_finished() {
  std::optional<Evaluation> e = progress_.evaluation;
  const bool with_train_loss = e || measures_train_loss();
  if (!e) e = evaluate(progress_.step, recent_train_loss());
  if (!e) return 128 + interrupt_signal();
  const bool target_met = progress_.reached_target && progress_.evaluation && meets_target(*e, c_);
  std::printf("%s: %s at step %lld, %s; the run is finished (nothing to do: raise %s%s to go on)\n", c_.task.c_str(),
              describe(*e, with_train_loss).c_str(), static_cast<long long>(progress_.step),
              target_met ? "the target was reached" : "its last step", flag(&Config::steps).dashed().c_str(),
              target_met ? " or the target" : "");
  if (communicator_.is_root()) workload_->export_model(std::cout);
  return 0;
}

std::optional<Evaluation> Trainer::evaluate(std::int64_t step, double recent_train_loss) {
  // Under mpirun every rank evaluates the same batches, asking between each whether a
  // signal came to any rank: all stop at the same batch, however long the evaluation.
  if (communicator_.size() > 1) return workload_->evaluate(step, recent_train_loss, [this] { return signal_agreed(); });
  return workload_->evaluate(step, recent_train_loss, was_interrupted);
}

// Evaluates at `step`; false when a signal interrupted it or the target is reached.
bool Trainer::evaluate_and_go_on(std::int64_t step) {
  const std::optional<Evaluation> e = evaluate(step, recent_train_loss());
  if (!e) return false;
  // Weights whose validation loss is not finite diverged at the last update: stopped
  // before they are written anywhere, as a non-finite training loss is.
  if (!std::isfinite(e->val_loss) && !c_.allow_nonfinite)
    throw EveryRankError(str("step ", step, ": the validation loss is ", e->val_loss, "; training diverged (lower ",
                             flag(&Config::lr), ", or pass ", flag(&Config::allow_nonfinite), " to go on)"));
  live_.clear();
  after_evaluation(step, *e, schedule_->rate(step - 1));
  // Under mpirun rank 0's evaluation decides for every rank: ranks on different CPUs may
  // differ in the last bits, and one rank stopping alone would leave the others waiting.
  return communicator_.size() > 1 ? communicator_.all_gather({progress_.reached_target ? 1.0 : 0.0})[0] == 0.0
                                  : !progress_.reached_target;
}

void Trainer::after_evaluation(std::int64_t step, const Evaluation& e, double lr) {
  const double train_s = progress_.train_s, wall_s = wall_s_before_ + seconds_since(started_);
  progress_.step = step;
  progress_.wall_s = wall_s;
  progress_.evaluation = e;
  if (std::isfinite(e.val_loss))
    progress_.best_val_loss = std::min(progress_.best_val_loss.value_or(e.val_loss), e.val_loss);
  progress_.curve.push_back({step, e.train_loss, e.val_loss});
  progress_.recent_loss_sum = 0, progress_.recent_steps = 0;
  if (!c_.quiet)
    std::printf("step %lld/%d  %s  (%.1f s)\n", static_cast<long long>(step), c_.steps, describe(e).c_str(), wall_s);
  write_metrics(metrics_line(step, e, lr, train_s, wall_s));
  if (!c_.plot.empty())
    write_learning_curve_png(c_.plot, flag(&Config::plot), progress_.curve,
                             run_title(c_, workload_->sizes(), model_.num_parameters()));
  progress_.reached_target = meets_target(e, c_);
  if (progress_.reached_target && !reached_step_) {
    reached_step_ = step;
    // The clock of each reference: training time for lm, wall time for the toy tasks.
    reached_seconds_ = c_.language_model() ? train_s : wall_s;
  }
  save(progress_);
  // libxgrad keeps freed heap memory for the next steps (autograd/startup.cpp); the
  // evaluation's and the checkpoint's buffers, of other sizes, would otherwise leave the
  // heap a little more fragmented each time: a long run's resident memory would creep
  // (8% over 20,000 steps) with nothing leaked. Once per evaluation, give it back.
  ::malloc_trim(0);
}

int Trainer::run() {
  start_step_ = step_ = completed_ = progress_.step;
  train_s_before_ = progress_.train_s, wall_s_before_ = progress_.wall_s;
  if (c_.eval_only) return evaluate_only();
  // An evaluation due at the step the run resumes from that did not happen (a signal came
  // during it) runs first; a run with nothing left to do is reported.
  const bool evaluated_here = !progress_.curve.empty() && progress_.curve.back().step == start_step_;
  const bool evaluation_due =
      start_step_ > 0 && !evaluated_here && (start_step_ % c_.eval_every == 0 || start_step_ == c_.steps);
  const bool target_met = progress_.reached_target && progress_.evaluation && meets_target(*progress_.evaluation, c_);
  if (!c_.resume.empty() && !evaluation_due && (start_step_ >= c_.steps || target_met)) return report_finished();
  if (!c_.resume.empty() && !c_.metrics.empty()) keep_metrics_up_to(c_, start_step_, progress_.curve);
  catch_interrupts();
  // Under mpirun a rank's output reaches mpirun's, not the user's, terminal: whether that
  // is one cannot be told here, and a rewritten line would land in logs as is.
  live_ = ProgressLine(::isatty(::fileno(stdout)) && !c_.quiet && !distributed::launched_by_mpirun());
  profile_ = std::make_unique<ProfileWindow>(c_, start_step_, communicator_.rank() == 0);
  announce();
  try {
    train(evaluation_due);
  } catch (const distributed::CommunicationError& e) {
    stop_on_broken_communication(e);
  }
  profile_->end_run(live_);
  live_.clear();
  if (was_interrupted()) return stop_on_signal();
  if (communicator_.is_root()) workload_->export_model(std::cout);
  return finish(step_);
}

void Trainer::train(bool evaluation_due) {
  bool going_on = !evaluation_due || evaluate_and_go_on(step_);
  // A signal ends the loop where every rank learns of it (the check after each step); a
  // rank leaving on its own flag would leave the others waiting in the next step.
  while (going_on && step_ < c_.steps && (communicator_.size() > 1 || !was_interrupted())) {
    const double step_loss = take_step(++step_);
    show_progress(step_loss);
    if (signal_agreed()) break;
    if (step_ % c_.eval_every == 0 || step_ == c_.steps) going_on = evaluate_and_go_on(step_);
    if (going_on && c_.sample_every > 0 && step_ % c_.sample_every == 0 && !c_.quiet) {
      live_.clear();
      workload_->print_samples(std::cout, step_);
    }
  }
}

// One step: trained, checked, clipped and applied; its time and loss counted.
double Trainer::take_step(std::int64_t step) {
  profile_->begin_step(step);
  std::optional<ProfileStep> profiled_step(std::in_place);
  const Clock::time_point began = Clock::now();
  const double step_loss = train_step(step);
  // The loss and the reduced gradients are the same on every rank: so are these errors.
  const auto diverged = [&](const std::string& what) {
    return EveryRankError(str("step ", step, ": ", what, " (lower ", flag(&Config::lr), ", or pass ",
                              flag(&Config::allow_nonfinite), " to go on)"));
  };
  if (!std::isfinite(step_loss) && !c_.allow_nonfinite)  // before the update: the checkpoint stays good
    throw diverged(str("the loss is ", step_loss, "; training diverged"));
  double grad_factor = 1.0;  // the clipping, applied by the update as it reads the gradients
  try {
    if (c_.clip > 0) grad_factor = optim::grad_norm_clip(model_.parameters(), c_.clip, !c_.allow_nonfinite).factor;
  } catch (const Error& e) {
    throw diverged(e.what());
  }
  opt_->step(grad_factor);
  schedule_->step();
  completed_ = step;
  profiled_step.reset();
  progress_.train_s += seconds_since(began);
  progress_.recent_loss_sum += step_loss, ++progress_.recent_steps;
  profile_->end_step(step % c_.eval_every == 0 || step == c_.steps, live_);
  return step_loss;
}

// Forward and backward of this process's micro-batches of the step, their gradients
// averaged over the job (the reducer), and the step's loss: the mean of every
// micro-batch's, summed in micro-batch order on every rank.
double Trainer::train_step(std::int64_t step) {
  const auto micro_batches = static_cast<std::size_t>(c_.micro_batches());
  const auto first = static_cast<std::size_t>(communicator_.rank() * c_.accum_steps);
  std::vector<double> losses;
  for (std::size_t micro = first; micro < first + static_cast<std::size_t>(c_.accum_steps); ++micro) {
    // Dropout: stream 3 for micro-batch 0 (as without accumulation), 3 + 8 m for m.
    manual_seed(stream_generator(c_.seed, 3 + 8 * micro, static_cast<std::uint64_t>(step)).next_u64());
    opt_->zero_grad();
    if (reducer_) reducer_->begin_micro_batch();
    Tensor loss = workload_->training_loss(step, micro, micro_batches);
    loss.backward();
    losses.push_back(loss.item());
  }
  if (reducer_) reducer_->finish();
  const std::vector<double> all = communicator_.all_gather(losses);
  double sum = 0;
  for (const double loss : all) sum += loss;
  return sum / static_cast<double>(all.size());
}

// On a terminal, at most ten times a second.
void Trainer::show_progress(double step_loss) {
  if (seconds_since(last_shown_) <= 0.1) return;
  const double trained = progress_.train_s - train_s_before_, run_s = seconds_since(started_);
  const auto steps_here = static_cast<double>(step_ - start_step_);
  live_.show(step_, c_.steps, step_loss, steps_here * c_.batch * c_.seq_len / trained, steps_here / run_s);
  last_shown_ = Clock::now();
}

// Whether a signal came, to this rank or (under mpirun) to another: the job stops.
bool Trainer::signal_agreed() {
  if (!communicator_.any(was_interrupted())) return false;
  if (!was_interrupted()) interrupt_as(SIGINT);  // another rank's signal
  return true;
}

// Ctrl-C or SIGTERM: the run is saved where it stands.
int Trainer::stop_on_signal() {
  if (c_.save.empty()) {
    std::cout << "interrupted at step " << step_ << " (no " << flag(&Config::save) << " given, nothing kept)"
              << std::endl;
  } else {
    save_at(step_);
    // The exports are written at a run's end: a resume gives them again.
    std::cout << "interrupted at step " << step_ << "; checkpoint saved: continue with " << flag(&Config::resume) << " "
              << c_.save << (c_.save_hf.empty() ? "" : str(" ", flag(&Config::save_hf), " ", c_.save_hf)) << std::endl;
  }
  return 128 + interrupt_signal();
}

// This rank's weights, optimizer and schedule are those of its last completed step, a
// state of the run like any other (another rank may be a step further: replicas agree up
// to the steps both completed): rank 0 saves them.
void Trainer::stop_on_broken_communication(const distributed::CommunicationError& e) {
  live_.clear();
  std::string kept;
  if (communicator_.is_root() && c_.save.empty()) kept = str(" (no ", flag(&Config::save), " given, nothing kept)");
  if (communicator_.is_root() && !c_.save.empty()) {
    try {
      save_at(completed_);
      kept = str("; checkpoint saved at step ", completed_, ": continue with ", flag(&Config::resume), " ", c_.save);
    } catch (const std::exception& failed) {
      kept = str("; saving the checkpoint failed: ", failed.what());
    }
  }
  throw distributed::CommunicationError(str("step ", step_, ": ", e.what(), kept));
}

int Trainer::finish(std::int64_t step) {
  const double wall_s = wall_s_before_ + seconds_since(started_), train_s = progress_.train_s;
  const Evaluation last = progress_.evaluation.value_or(Evaluation{});
  if (!c_.metrics.empty()) {
    const bool reached = reached_step_.has_value();
    JsonLine line{
        {"final", true},
        {"task", c_.task},
        {"steps", step},
        {"val_loss", decimals(last.val_loss, 4)},
        {"best_val_loss", progress_.best_val_loss ? JsonLine(decimals(*progress_.best_val_loss, 4)) : JsonLine()},
        {"train_s", decimals(train_s, 2)},
        {"wall_s", decimals(wall_s, 2)},
        {"ms_per_step", decimals(1e3 * train_s / static_cast<double>(step), 2)},
        {"tokens_per_s", decimals(static_cast<double>(step) * c_.batch * c_.seq_len / train_s, 0)},
        {"reached_target", reached},
        {"steps_to_target", reached ? JsonLine(*reached_step_) : JsonLine()},
        {"seconds_to_target", reached ? JsonLine(decimals(reached_seconds_, 2)) : JsonLine()},
        {"impl", str("xgrad-", version())}};
    if (last.bits_per_byte) line["val_bits_per_byte"] = decimals(*last.bits_per_byte, 4);
    write_metrics(json_text(line));
  }
  const std::string outcome = describe(last);
  if (reached_step_)
    std::printf("%s: %s; reached the target at step %lld in %.1f s\n", c_.task.c_str(), outcome.c_str(),
                static_cast<long long>(*reached_step_), reached_seconds_);
  else
    std::printf("%s: %s after %lld steps%s in %.1f s\n", c_.task.c_str(), outcome.c_str(), static_cast<long long>(step),
                c_.language_model() && !c_.target_val_loss ? "" : " (target not reached)", wall_s);
  show_what_was_learned(step);
  return 0;
}

void Trainer::show_what_was_learned(std::int64_t step) {
  if (c_.quiet) {
    std::ostringstream ignored;
    if (!c_.attention_png.empty()) workload_->show_attention(ignored, c_.attention_png);
    return;
  }
  const double trained = progress_.train_s - train_s_before_;
  const double tokens = static_cast<double>((step - start_step_) * c_.batch * c_.seq_len);
  std::printf("trained %lld steps here: %.2fM tokens in %.1f s of training, %.1fk tokens/s\n\n",
              static_cast<long long>(step - start_step_), tokens / 1e6, trained,
              tokens / 1e3 / std::max(trained, 1e-9));
  workload_->print_samples(std::cout, step);
  workload_->show_attention(std::cout, c_.attention_png);
}

}  // namespace tools
