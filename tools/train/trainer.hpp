#pragma once
// The training run of xgrad-train: the loop over steps (each micro-batch's forward and
// backward, the gradients reduced over the job, clipping, the update), evaluations with
// their lines, metrics and checkpoints, interruption by a signal or a broken
// communication, --profile, and the summary at the end. Every task runs through it, as a
// Workload (workload.hpp).

#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "config.hpp"
#include "display.hpp"
#include "progress.hpp"
#include "workload.hpp"
#include "xgrad/distributed/communicator.hpp"
#include "xgrad/distributed/reducer.hpp"
#include "xgrad/nn/checkpoint.hpp"
#include "xgrad/optim/optim.hpp"

namespace tools {

using Clock = std::chrono::steady_clock;

// An error every rank meets at the same point (a diverged loss, computed alike on all):
// they all stop with exit code 2, rank 0 alone saying why, no MPI_Abort.
struct EveryRankError : UsageError {
  using UsageError::UsageError;
};

// The checkpoint a run starts from (--resume or --init-from), read once.
struct Start {
  std::optional<Flag> flag;  // none: a fresh run
  bool resume = false;
  std::string path;
  xgrad::nn::SafetensorsContents contents;
  std::string source() const { return xgrad::str(*flag, " ", path); }  // "--resume run.st"
};

// The checkpoint --resume or --init-from names, read and checked to be one (nothing for a
// fresh run).
Start read_start(const Config& c);

// A published model's checkpoint sized by a config.json records the flags' defaults beside
// its lm.model_config: --layers, --heads, --d-model and --ff then do nothing, and are
// refused (they were checked against those defaults).
void check_size_flags(const Given& given, const Start& start);

// Whether the checkpoint a run starts from holds LoRA adapters.
bool holds_adapters(const Start& start);

// LoRA against the checkpoint a run starts from: under --eval-only, --lora only where the
// checkpoint holds adapters (new ones, B = 0, change nothing); a checkpoint holding
// adapters goes on only with --lora.
void check_adapters(const Config& c, const Start& start);

// --task lm's data (language_data_open.cpp): the text or the shards, checked against the
// checkpoint `start` names; sets c.vocab.
std::shared_ptr<const LanguageData> open_language_data(Config& c, const Start& start);

class ProfileWindow;

class Trainer {
 public:
  Trainer(Config& c, const xgrad::distributed::Communicator& communicator, std::unique_ptr<Workload> workload,
          const Start& start);
  ~Trainer();

  // Every replica starts from rank 0's weights (a collective: after every rank set up).
  void start() { xgrad::distributed::broadcast_state(communicator_, model_); }
  int run();

 private:
  void load(const Start& start);
  void write_metrics(const std::string& line);
  void announce() const;
  int evaluate_only();
  int report_finished();
  // The steps: each trained (take_step), then the evaluation, samples and signals due.
  void train(bool evaluation_due);
  double take_step(std::int64_t step);
  double train_step(std::int64_t step);
  void show_progress(double step_loss);
  // Evaluation: under mpirun a signal is acted on between steps only, where every rank
  // agrees on it.
  std::optional<Evaluation> evaluate(std::int64_t step, double recent_train_loss);
  bool evaluate_and_go_on(std::int64_t step);
  void after_evaluation(std::int64_t step, const Evaluation& e, double lr);
  // The mean training loss since the last evaluation (nan when no step ran since).
  double recent_train_loss() const { return progress_.recent_loss_sum / static_cast<double>(progress_.recent_steps); }
  // Whether an evaluation now measures a train loss: lm measures it on its windows, a toy
  // task's is the mean of the training steps since the last evaluation (if any ran).
  bool measures_train_loss() const { return c_.language_model() || progress_.recent_steps > 0; }
  // Interruption: a signal, or a communication of the job that broke.
  bool signal_agreed();
  int stop_on_signal();
  [[noreturn]] void stop_on_broken_communication(const xgrad::distributed::CommunicationError& e);
  void save(const Progress& progress) const;
  void save_at(std::int64_t step) const;  // the progress as of `step`, the last step run
  int finish(std::int64_t step);
  void show_what_was_learned(std::int64_t step);

  Config& c_;
  const xgrad::distributed::Communicator& communicator_;
  std::unique_ptr<Workload> workload_;
  xgrad::nn::Module& model_;
  std::unique_ptr<xgrad::distributed::GradientReducer> reducer_;  // with more than one micro-batch per step
  std::unique_ptr<xgrad::optim::Optimizer> opt_;
  std::unique_ptr<xgrad::optim::LRSchedule> schedule_;
  Progress progress_;  // where the run stands; as resumed at first
  std::ofstream metrics_;
  ProgressLine live_{false};
  std::unique_ptr<ProfileWindow> profile_;
  Clock::time_point started_ = Clock::now(), last_shown_ = started_;
  std::int64_t start_step_ = 0, step_ = 0;
  std::int64_t completed_ = 0;  // the last step whose update this rank applied
  double train_s_before_ = 0, wall_s_before_ = 0;
  std::optional<std::int64_t> reached_step_;
  double reached_seconds_ = 0;
};

}  // namespace tools
