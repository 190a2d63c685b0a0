#pragma once
// xgrad-train's settings: parsed from the command line, saved in every checkpoint, and
// compared on --resume.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.hpp"

namespace tools {

// The defaults are the toy tasks'; --task lm has its own (nanoGPT's shakespeare_char
// recipe), applied by parse_command_line to every flag not given.
struct Config {
  // The model (a checkpoint, resumed or fine-tuned, must agree on all of these).
  std::string task = "sort";
  int seq_len = 16, vocab = 16;                     // lm: vocab is the text's number of distinct bytes
  int d_model = 64, heads = 4, layers = 2, ff = 0;  // ff 0: 4 * d_model
  std::string positions = "learned";
  // How it learns (a resumed checkpoint must agree on these too).
  double dropout = 0.0;
  int batch = 64;
  double lr = 3e-3, min_lr = 0.0;
  std::string optimizer = "adam", schedule = "constant";
  double weight_decay = 0.0;  // on 2-D weights only (adamw: decoupled; adam, sgd: L2)
  double beta2 = 0.999;       // adam, adamw: the second moment's decay
  int warmup = 0;
  double clip = 0.0;
  std::uint64_t seed = 0;
  std::string precision = "float32";  // the matrix products' operands: float32 | bf16 (float32 sums)
  // How this run goes (free to change on --resume).
  int steps = 3000;
  int accum_steps = 1;       // micro-batches per step in each process (gradient accumulation)
  int ranks = 1;             // processes of the job (mpirun -np), not a flag
  int threads = 0;           // 0: every core (under mpirun: the cores of the machine / its ranks)
  double comm_timeout = 20;  // seconds a rank waits for the others in one communication
  int eval_every = 100, eval_size = 1000, eval_batches = 20;
  double target_exact = 0.99;
  std::optional<double> target_val_loss;
  int sample_every = 0;
  std::string text;  // lm: the corpus
  std::string save, resume, init_from, metrics, attention_png, plot;
  std::string profile;    // --profile PATH: PATH.json, PATH.png and the table
  int profile_steps = 5;  // steps profiled, after kProfileWarmupSteps
  bool eval_only = false;
  bool quiet = false;
  bool verbose = false;
  bool allow_nonfinite = false;  // keep going after a NaN or infinite loss

  bool language_model() const { return task == "lm"; }
  // Products of flags in 64 bits: int flags near their limit must not wrap.
  std::int64_t micro_batches() const { return std::int64_t{ranks} * accum_steps; }  // per step, over the whole job
  std::int64_t ff_width() const { return ff > 0 ? ff : std::int64_t{4} * d_model; }
};

// Steps a run trains before --profile starts recording (caches and buffers warm).
constexpr int kProfileWarmupSteps = 3;

// Parses argv into config; returns false when --help was printed. `given` receives the
// long names of the flags that appeared on the command line.
bool parse_command_line(int argc, char** argv, Config& config, std::set<std::string>& given);

// Flags that mean nothing for the task (--vocab for lm, --text for a toy task, ...) or
// for the options chosen (--beta2 with sgd, --warmup with a constant or step schedule,
// --save, --plot or --attention-png with --eval-only) are errors rather than silently
// ignored. After the checkpoint's settings are applied.
void check_task_flags(const Config& config, const std::set<std::string>& given);

// Checks the combination (heads divide d_model, positive sizes, finite numbers, known
// names: also what a checkpoint's metadata brought in).
void validate(const Config& config);

// The settings as checkpoint metadata, and back. On --resume, model and learning
// settings come from the checkpoint (a flag given that disagrees is an error) and run
// settings (steps, eval-every, eval-size, eval-batches, the targets, the text) come from
// it unless given again. On --init-from only the model's settings come from it.
using Metadata = std::map<std::string, std::string>;  // as nn::Metadata, a checkpoint's text entries
Metadata to_metadata(const Config& config);
void apply_metadata(const Metadata& metadata, Config& config, const std::set<std::string>& given);
// validate(), with a bad setting that was read from the checkpoint (not given) said as
// the checkpoint's: "<source>: the checkpoint's config.seq-len = '-5' cannot be used: must
// be at least 1, got -5". `source` names the file as the user gave it ("--resume x.st").
void validate_read(const Config& config, const Metadata& metadata, const std::set<std::string>& given,
                   const std::string& source);
void apply_model_metadata(const Metadata& metadata, Config& config, const std::set<std::string>& given);

// One held-out evaluation. Toy tasks: train_loss is the mean loss of the training
// batches since the previous evaluation (every batch is fresh), val_loss the loss on
// held-out sequences, with greedy accuracies. lm: both losses are means over the same
// --eval-batches windows of each split every time.
struct Evaluation {
  double train_loss = 0, val_loss = 0;
  std::optional<double> token_acc, exact_match;
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
