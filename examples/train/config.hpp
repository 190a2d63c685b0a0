#pragma once
// xgrad-train's settings: parsed from the command line, saved in every checkpoint, and
// compared on --resume.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

namespace train {

struct Config {
  // What is learned, and how (a checkpoint must agree on all of these).
  std::string task = "sort";
  int seq_len = 16, vocab = 16;
  int d_model = 64, heads = 4, layers = 2, ff = 0;  // ff 0: 4 * d_model
  double dropout = 0.0;
  std::string positions = "learned";
  int batch = 64;
  double lr = 3e-3;
  std::string optimizer = "adam", schedule = "constant";
  int warmup = 0;
  double clip = 0.0;
  std::uint64_t seed = 0;
  // How this run goes (free to change on --resume).
  int steps = 3000;
  int threads = 0;  // 0: every core
  int eval_every = 100, eval_size = 1000;
  double target_exact = 0.99;
  std::string save, resume, metrics, attention_png;
  bool quiet = false;
  bool verbose = false;
  bool allow_nonfinite = false;  // keep going after a NaN or infinite loss

  int ff_width() const { return ff > 0 ? ff : 4 * d_model; }
};

// A bad flag or setting: main prints it on one line and exits with code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parses argv into config; returns false when --help was printed. `given` receives the
// long names of the flags that appeared on the command line.
bool parse_command_line(int argc, char** argv, Config& config, std::set<std::string>& given);

// Checks the combination (heads divide d_model, positive sizes, finite numbers, known
// names: also what a checkpoint's metadata brought in).
void validate(const Config& config);

// The settings as checkpoint metadata, and back: learning settings come from the
// checkpoint (a flag given that disagrees is an error); run settings (steps, eval-every,
// eval-size, target-exact) come from it unless given again.
using Metadata = std::map<std::string, std::string>;  // as nn::Metadata, a checkpoint's text entries
Metadata to_metadata(const Config& config);
void apply_metadata(const Metadata& metadata, Config& config, const std::set<std::string>& given);

// Where a checkpointed run stands: written with every checkpoint, read on --resume.
struct Progress {
  std::int64_t step = 0;
  double elapsed_s = 0;
  // The evaluation at `step`, when one ran there.
  std::optional<double> token_acc, exact_match;
  bool reached_target = false;
};
void add_progress(Metadata& metadata, const Progress& progress);
Progress read_progress(const Metadata& metadata);  // a damaged entry is a UsageError naming it

}  // namespace train
