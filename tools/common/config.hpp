#pragma once
// xgrad-train's settings: what the trainer reads (Config), filled from the command line
// and from checkpoints by one table of rows (config_table.cpp: every flag's name, range,
// help, defaults, kind and the options that make it meaningless), checked
// (config_checks.cpp), and kept in every checkpoint (config_record.cpp).

#include <cstdint>
#include <optional>
#include <string>

#include "settings.hpp"

namespace tools {

// The defaults, and --task lm's (nanoGPT's shakespeare_char recipe), are the table's.
struct Config {
  // The model (a checkpoint, resumed or fine-tuned, must agree on all of these).
  std::string task;
  int seq_len = 0, vocab = 0;                      // lm: the text's distinct bytes, or the tokenizer's
  int d_model = 0, heads = 0, layers = 0, ff = 0;  // ff 0: 4 * d_model
  std::string positions;
  std::string model;  // lm: gpt (xgrad's own) | gpt2 | llama (Hugging Face's families)
  // How it learns (a resumed checkpoint must agree on these too).
  double dropout = 0;
  int batch = 0;
  double lr = 0, min_lr = 0;
  std::string optimizer, schedule;
  double weight_decay = 0;  // on 2-D weights only (adamw: decoupled; adam, sgd: L2)
  double beta2 = 0;         // adam, adamw: the second moment's decay
  int warmup = 0;
  double clip = 0;
  std::uint64_t seed = 0;
  std::string precision;  // the matrix products' operands: float32 | bf16 (float32 sums)
  int lora = 0;           // gpt2, llama: LoRA adapters of this rank on a frozen model (0: off)
  double lora_alpha = 0, lora_dropout = 0;
  std::string lora_targets;  // PEFT's target_modules: names, comma-separated
  // How this run goes (carried on by a resume unless given again).
  int steps = 0;
  int accum_steps = 0;  // micro-batches per step in each process (gradient accumulation)
  int eval_every = 0, eval_size = 0, eval_batches = 0;
  double target_exact = 0;
  std::optional<double> target_val_loss;
  int sample_every = 0;
  std::string text;       // lm: the corpus, learnt byte by byte (the char recipe)
  std::string data;       // lm: a folder of token shards, learnt instead of text
  std::string tokenizer;  // lm: the shards' tokenizer (--tokenizer's forms: tokenizer_files.hpp)
  // This process alone.
  int ranks = 1;            // processes of the job (mpirun -np), not a flag
  int threads = 0;          // 0: every core (under mpirun: the cores of the machine / its ranks)
  double comm_timeout = 0;  // seconds a rank waits for the others in one communication
  std::string save, resume, init_from, metrics, attention_png, plot;
  std::string model_config;     // gpt2, llama: a Hugging Face config.json giving the sizes
  std::string save_hf;          // gpt2, llama: a Hugging Face directory written at the end
  bool recompute = false;       // lm: recompute each block's forward in backward
  bool keep_denormals = false;  // float32 denormals computed, not flushed to zero
  std::string profile;          // --profile PATH: PATH.json, PATH.png and the table
  int profile_steps = 0;        // steps profiled, after kProfileWarmupSteps
  bool eval_only = false;
  bool quiet = false;
  bool verbose = false;
  bool allow_nonfinite = false;  // keep going after a NaN or infinite loss
  // Not flags: where the weights started (--init-from, carried on by a resume: the
  // checkpoint's init_from), and the Hugging Face folder they came from, if any (PEFT's
  // base_model_name_or_path; the checkpoint's base_model).
  std::string started_from, base_model;

  bool language_model() const { return task == "lm"; }
  bool published_model() const { return model == "gpt2" || model == "llama"; }
  // Products of flags in 64 bits: int flags near their limit must not wrap.
  std::int64_t micro_batches() const { return std::int64_t{ranks} * accum_steps; }  // per step, over the whole job
  std::int64_t ff_width() const { return ff > 0 ? ff : std::int64_t{4} * d_model; }
};

// xgrad-train's table (config_table.cpp): settings_of<Config>() holds it.
Settings<Config> settings_table(std::type_identity<Config>);

// Steps a run trains before --profile starts recording (caches and buffers warm).
constexpr int kProfileWarmupSteps = 3;

// Parses argv into config (config.ranks set before); returns false when --help or
// --version was printed. `given` receives the flags that appeared on the command line.
bool parse_command_line(int argc, char** argv, Config& config, Given& given);

// Flags that mean nothing for the task (--vocab for lm, --text for a toy task, ...) or
// for the options chosen (--beta2 with sgd, ...) are errors rather than silently
// ignored. After the checkpoint's settings are applied.
void check_task_flags(const Config& config, const Given& given);

// Checks every setting's range, then the combinations (heads divide d_model, ...): also
// what a checkpoint's metadata brought in. A SettingError naming the flag.
void validate(const Config& config);

// The settings as checkpoint metadata, and back. On --resume, model and learning
// settings come from the checkpoint (a flag given that disagrees is an error) and run
// settings come from it unless given again. On --init-from only the model's settings come
// from it (and xgrad-generate reads them so), with the LoRA adapters' alpha and targets
// where it holds `adapters` (they are part of the model they make). Settings the
// checkpoint does not set take their defaults again (its task's recipe's).
Metadata to_metadata(const Config& config);
void apply_metadata(const Metadata& metadata, Config& config, const Given& given);
void apply_model_metadata(const Metadata& metadata, Config& config, const Given& given, bool adapters);
// validate(), with a bad setting that was read from the checkpoint (not given) said as
// the checkpoint's: "<source>: the checkpoint's config.seq-len = '-5' cannot be used: must
// be at least 1, got -5". `source` names the file as the user gave it ("--resume x.st").
void validate_read(const Config& config, const Metadata& metadata, const Given& given, const std::string& source);

}  // namespace tools
