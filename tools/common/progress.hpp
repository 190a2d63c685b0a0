#pragma once
// Where a checkpointed run of xgrad-train stands: its evaluations, learning curve and
// clocks, written with every checkpoint and read back on --resume.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "settings.hpp"

namespace tools {

// One held-out evaluation. Toy tasks: train_loss is the mean loss of the training
// batches since the previous evaluation (every batch is fresh), val_loss the loss on
// held-out sequences, with greedy accuracies. lm: both losses are means over the same
// --eval-batches windows of each split every time.
struct Evaluation {
  double train_loss = 0, val_loss = 0;
  std::optional<double> token_acc, exact_match;
  std::optional<double> bits_per_byte;  // lm: the validation loss per byte of text, in bits
};

// One evaluation on the learning curve.
struct CurvePoint {
  std::int64_t step = 0;
  double train_loss = 0, val_loss = 0;
};

// Where a checkpointed run stands: written with every checkpoint, read on --resume.
struct Progress {
  std::int64_t step = 0;
  double wall_s = 0, train_s = 0;        // since the run began, over every resume
  std::optional<Evaluation> evaluation;  // the one at `step`, when one ran there
  std::optional<double> best_val_loss;
  bool reached_target = false;
  std::vector<CurvePoint> curve;  // every evaluation so far, for --plot
  // The training losses since the last evaluation (a toy task's train_loss is their mean).
  double recent_loss_sum = 0;
  std::int64_t recent_steps = 0;
};
void add_progress(Metadata& metadata, const Progress& progress);
// A damaged entry, or entries that contradict each other, are a UsageError naming them
// and `source` ("--resume run.st").
Progress read_progress(const Metadata& metadata, const std::string& source);

}  // namespace tools
