#pragma once
// What a training run says and writes about its evaluations: the lines people read, the
// metrics file's JSON lines (the keys of the PyTorch reference trainers), that file kept
// in order on resume, and the learning curve's title.

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "config.hpp"
#include "progress.hpp"

namespace tools {

// The evaluation as people read it: losses (lm: the validation loss also in bits per byte
// of text, comparable across tokenizers) and, for the
// toy tasks, the greedy accuracies. Without train_loss when none was measured (a toy task
// evaluated with no training step since the last evaluation).
std::string describe(const Evaluation& e, bool with_train_loss = true);

// The evaluation as a metrics line.
std::string metrics_line(std::int64_t step, const Evaluation& e, double lr, double train_s, double wall_s);

// One line appended to the metrics file, checked: a full disk is an error, not a silently
// empty file.
void write_line(std::ofstream& out, const Config& c, const std::string& line);

// The metrics file a resumed run appends to, made what an uninterrupted run would have
// written by `step`: each evaluation up to it once, in order. A run killed after writing
// lines past its last checkpoint (or in the middle of a line) left lines its resume writes
// again; a finished run's summary line is written again at the end. A run that had not
// evaluated yet replaces the lines up to `step` (another run's: it would have at its first
// evaluation); a line at a step of its learning curve with other losses is another run's,
// an error. (Lines at steps the curve lacks stay: --eval-only's.)
void keep_metrics_up_to(const Config& c, std::int64_t step, const std::vector<CurvePoint>& curve);

// A model's sizes in words: "2 layers, d-model 64, 4 heads".
std::string model_sizes(std::size_t layers, std::size_t width, std::size_t heads);
// Those the flags give it.
std::string flag_sizes(const Config& c);

// The run's settings in a line: the learning curve's title. `sizes`: the model's, in words
// (Workload::sizes).
std::string run_title(const Config& c, const std::string& sizes, std::size_t parameters);

}  // namespace tools
