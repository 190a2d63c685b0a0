#include "flags.hpp"

#include "xgrad/autograd/parallel.hpp"

namespace tools::flags {

const Declaration& threads() {
  static const Declaration declared = Declaration("threads", Shape::whole)
                                          .help("threads (0: every core)")
                                          .at_least(0)
                                          .at_most_now([] { return xgrad::max_threads(); })
                                          .range_note(" (4 per CPU this process may use)");
  return declared;
}

const Declaration& seed() {
  static const Declaration declared = Declaration("seed", Shape::whole).help("seed of every random draw");
  return declared;
}

const Declaration& precision() {
  static const Declaration declared =
      Declaration("precision", Shape::choice, {"float32", "bf16"})
          .help(
              "bf16 rounds the matrix products' operands to bfloat16; their sums and everything else stay "
              "float32 (mixed precision)");
  return declared;
}

const Declaration& keep_denormals() {
  static const Declaration declared =
      Declaration("keep-denormals", Shape::toggle)
          .help(
              "compute with float32's denormals (below 2^-126) instead of flushing them to zero, as "
              "torch.set_flush_denormal(False): the same results but for values that tiny, and steps that can "
              "run ten times slower once softmax probabilities or Adam's moments underflow into them");
  return declared;
}

const Declaration& profile() {
  static const Declaration declared =
      Declaration("profile", Shape::path)
          .help("profile ", profile_steps,
                " steps with xgrad::Profiler: print the table of where the time went, write PATH.json (a Chrome "
                "trace: Perfetto, chrome://tracing) and PATH.png (a timeline of the last step)");
  return declared;
}

const Declaration& profile_steps() {
  static const Declaration declared =
      Declaration("profile-steps", Shape::whole).help("steps recorded by ", profile).at_least(1);
  return declared;
}

const Declaration& seq_len() {
  static const Declaration declared = Declaration("seq-len", Shape::whole).help("tokens per sequence").at_least(1);
  return declared;
}

const Declaration& vocab() {
  static const Declaration declared = Declaration("vocab", Shape::whole).help("tokens are 0 .. vocab-1").at_least(1);
  return declared;
}

const Declaration& d_model() {
  static const Declaration declared = Declaration("d-model", Shape::whole).help("model width").at_least(1);
  return declared;
}

const Declaration& heads() {
  static const Declaration declared =
      Declaration("heads", Shape::whole).help("attention heads (must divide ", d_model, ")").at_least(1);
  return declared;
}

const Declaration& layers() {
  static const Declaration declared = Declaration("layers", Shape::whole).help("transformer layers").at_least(1);
  return declared;
}

const Declaration& ff() {
  static const Declaration declared =
      Declaration("ff", Shape::whole).help("feed-forward width (0: 4 x ", d_model, ")").at_least(0);
  return declared;
}

const Declaration& dropout() {
  static const Declaration declared =
      Declaration("dropout", Shape::real).help("dropout in every layer, [0, 1)").at_least(0).below(1);
  return declared;
}

const Declaration& recompute() {
  static const Declaration declared =
      Declaration("recompute", Shape::toggle)
          .help(
              "recompute each block's forward during backward instead of keeping its activations (the same "
              "gradients, less memory, about a third more time)");
  return declared;
}

const Declaration& batch() {
  static const Declaration declared = Declaration("batch", Shape::whole).help("sequences per step").at_least(1);
  return declared;
}

const Declaration& steps() {
  static const Declaration declared = Declaration("steps", Shape::whole).help("most training steps").at_least(1);
  return declared;
}

const Declaration& warmup() {
  static const Declaration declared =
      Declaration("warmup", Shape::whole).help("steps of linear warmup of the learning rate").at_least(0);
  return declared;
}

const Declaration& text() {
  static const Declaration declared = Declaration("text", Shape::path).help("a text file");
  return declared;
}

const Declaration& out() {
  static const Declaration declared = Declaration("out", Shape::path).help("what to write");
  return declared;
}

const Declaration& tokenizer() {
  static const Declaration declared =
      Declaration("tokenizer", Shape::path)
          .help(
              "a byte-level BPE vocabulary: a folder holding encoder.json and vocab.bpe (or vocab.json and "
              "merges.txt), the two files joined by a comma, or a tiktoken rank file");
  return declared;
}

}  // namespace tools::flags
