#pragma once
// What xgrad-train trains, behind one interface so that the training loop, evaluation
// schedule, checkpoints and metrics are the same for every task: the toy sequence tasks
// (an encoder predicting a token at every position) and the language model (a GPT
// predicting the next token of a text).

#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>

#include "config.hpp"
#include "language_data.hpp"
#include "progress.hpp"
#include "xgrad/nn/module.hpp"

namespace tools {

class Workload {
 public:
  virtual ~Workload() = default;

  virtual xgrad::nn::Module& model() = 0;
  // The mean cross-entropy of micro-batch `micro` of `micro_batches` (equal slices of
  // rows) of step `step`'s training batch, with its graph. Batches are functions of
  // (seed, step), so a resumed run draws what an uninterrupted one would, and every rank
  // of a job slices the same batch.
  virtual xgrad::Tensor training_loss(std::int64_t step, std::size_t micro, std::size_t micro_batches) = 0;
  // Held-out evaluation after `step` (see Evaluation); `recent_train_loss` is the mean
  // training loss since the previous evaluation. Nothing when `interrupted()` turns true
  // first. Under mpirun `interrupted()` is a collective: every rank asks it at the same
  // points (before each of the same batches), or the job waits out --comm-timeout.
  virtual std::optional<Evaluation> evaluate(std::int64_t step, double recent_train_loss,
                                             const std::function<bool()>& interrupted) = 0;
  // A few samples of what the model does now (toy tasks: predictions on held-out
  // sequences; lm: generated text).
  virtual void print_samples(std::ostream& os, std::int64_t step) = 0;
  // The last layer's attention on one input: printed (when small enough to read) and
  // drawn to `png` unless it is empty.
  virtual void show_attention(std::ostream& os, const std::string& png) = 0;
  // At the end of a run that was not interrupted, on rank 0: the exports asked for
  // (lm: --save-hf's Hugging Face directory).
  virtual void export_model(std::ostream& os) { (void)os; }
  // Checkpoint entries beyond the settings (lm: the vocabulary).
  virtual void add_metadata(Metadata& metadata) const { (void)metadata; }
  // The model's sizes in words ("2 layers, d-model 64, 4 heads"): the flags' (flag_sizes),
  // or those of the config.json or checkpoint that sized it.
  virtual std::string sizes() const = 0;
};

// The workloads, their models initialised from the process-wide generator.
std::unique_ptr<Workload> make_toy_workload(const Config& config);
// `checkpoint`: the metadata of the checkpoint the run starts from (--resume, --init-from).
std::unique_ptr<Workload> make_language_workload(const Config& config, std::shared_ptr<const LanguageData> data,
                                                 const Metadata* checkpoint);

}  // namespace tools
