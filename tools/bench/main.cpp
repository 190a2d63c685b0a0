// xgrad-bench: the model, data, optimizer and step of ../shared/bench/torch_reference.py,
// timed the same way, printed as the same JSON line (plus model_gflop and gflops).
//
//   xgrad-bench --config tiny|medium|long|xlong|lm|sgemm|overhead
//   xgrad-bench --config gpt2|encoder-124m [--batch 4] [--seq-len 64] [--recompute]  (GPT-2 124M's shape)
//   xgrad-bench --config gpt2 --embedding-std 1 [--keep-denormals]   (softmax underflowing)
//   xgrad-bench --config optimizers     (AdamW, Adam, SGD over GPT-2 124M's parameters: GB/s
//                                        against the machine's copy bandwidth, measured too)
//   xgrad-bench --config CONFIG --profile PATH [--profile-steps 3]   (after the timed steps:
//                                  PATH.json, PATH.png, the table on stderr)
//   mpirun -np 2 xgrad-bench --config allreduce --threads 1 [--threads N] [--steps N]
//
// sgemm prints the machine's cblas_sgemm rate (1024 x 1024, the same threads); overhead
// prints the microseconds per op of forward + backward over a long chain of tiny ops.

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <vector>

#include "cli.hpp"
#include "flags.hpp"
#include "gpt.hpp"
#include "json.hpp"  // the tools' models (tools/common)
#include "memory.hpp"
#include "model.hpp"
#include "numbers.hpp"
#include "preflight.hpp"
#include "timeline.hpp"
#include "xgrad/autograd/blas.hpp"
#include "xgrad/autograd/denormals.hpp"
#include "xgrad/autograd/gemm.hpp"
#include "xgrad/autograd/ops.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/autograd/precision.hpp"
#include "xgrad/autograd/version.hpp"
#include "xgrad/distributed/reducer.hpp"
#include "xgrad/models/gpt2.hpp"
#include "xgrad/nn/profiler.hpp"
#include "xgrad/optim/optim.hpp"

using namespace xgrad;

namespace {

struct BenchConfig {
  std::size_t batch, seq_len, d_model, heads, layers, vocab;
};

// The flags.
struct BenchOptions {
  std::string config;
  int threads = 0, steps = 0, warmup = 0;
  int batch = 0, seq_len = 0;  // gpt2, encoder-124m
  bool recompute = false;      // gpt2
  double embedding_std = 0;    // gpt2: 0 is GPT-2's own init
  bool keep_denormals = false;
  std::string precision;
  std::string profile;  // empty: none
  int profile_steps = 0;
};

// xgrad-bench's table: one row per flag (tools/common/settings.hpp).
tools::Settings<BenchOptions> settings_table(std::type_identity<BenchOptions>) {
  using namespace tools::setting;
  return {
      "xgrad-bench",
      Text::of(
          "one benchmark configuration, printed as JSON lines (one for a model's step or sgemm; optimizers one per "
          "optimizer, allreduce one per size)"),
      {
          choice(&BenchOptions::config, "config",
                 {"tiny", "medium", "long", "xlong", "lm", "gpt2", "encoder-124m", "sgemm", "optimizers", "overhead",
                  "allreduce"})
              .help("allreduce runs under mpirun; gpt2 is Hugging Face's GPT-2 124M (12 layers, 12 heads, 768 wide, "
                    "vocabulary 50,257), encoder-124m the same shape and step from xgrad's encoder layers; optimizers "
                    "times "
                    "AdamW, Adam and SGD steps over GPT-2 124M's parameters against a copy of the same bytes")
              .fallback("tiny"),
          bind(&BenchOptions::threads, flags::threads()).help("threads for kernels and BLAS").at_least(1).fallback(2),
          bind(&BenchOptions::steps, flags::steps())
              .help("timed steps (0: a model's for about 3 s; sgemm 20 products, optimizers 7 steps, overhead and "
                    "allreduce 5)")
              .at_least(0)
              .at_most(1000000)  // sgemm and the others keep every timing for their median
              .fallback(0),
          // The other configs warm up their own way (sgemm 3 untimed products, optimizers and
          // allreduce 1 round; overhead takes its best step).
          bind(&BenchOptions::warmup, flags::warmup())
              .help("untimed steps first")
              .fallback(3)
              .unused_when(&BenchOptions::config, {"sgemm", "optimizers", "overhead", "allreduce"},
                           "a model's step takes it; the others warm up their own way"),
          bind(&BenchOptions::precision, flags::precision())
              .fallback("float32")
              .unused_when(&BenchOptions::config, {"optimizers", "overhead", "allreduce"},
                           "it runs in float32; a model's step and sgemm take bf16"),
          bind(&BenchOptions::batch, flags::batch())
              .fallback(4)
              .unused_unless(&BenchOptions::config, {"gpt2", "encoder-124m"}, "the other shapes are fixed"),
          bind(&BenchOptions::seq_len, flags::seq_len())
              .fallback(64)
              .unused_unless(&BenchOptions::config, {"gpt2", "encoder-124m"}, "the other shapes are fixed"),
          bind(&BenchOptions::recompute, flags::recompute())
              .unused_unless(&BenchOptions::config, {"gpt2"}, "only gpt2 recomputes its blocks"),
          real(&BenchOptions::embedding_std, "embedding-std")
              .help("initialise the tied token embedding N(0, X) instead of GPT-2's N(0, 0.02) (0): at 1 the logits "
                    "are large and softmax probabilities underflow into denormals")
              .at_least(0)
              .fallback(0)
              .unused_unless(&BenchOptions::config, {"gpt2"}, "only gpt2 has GPT-2's embedding"),
          bind(&BenchOptions::keep_denormals, flags::keep_denormals())
              .unused_when(&BenchOptions::config, {"sgemm", "optimizers", "overhead", "allreduce"},
                           "it times a model's training step"),
          bind(&BenchOptions::profile, flags::profile())
              .help("after the timed steps, profile ", flags::profile_steps,
                    " more: write PATH.json (a Chrome trace) and PATH.png (a timeline of one step), print the table on "
                    "stderr")
              .unused_when(&BenchOptions::config, {"sgemm", "optimizers", "overhead", "allreduce"},
                           "it profiles a model's training step: tiny, medium, long, xlong, lm, gpt2 or encoder-124m"),
          bind(&BenchOptions::profile_steps, flags::profile_steps())
              .fallback(3)
              .unused_without(&BenchOptions::profile, "give ", &BenchOptions::profile, " PATH too"),
      }};
}

using tools::flag;

const std::map<std::string, BenchConfig> kConfigs = {
    {"tiny", {32, 16, 64, 4, 2, 16}},
    {"medium", {32, 64, 256, 4, 2, 16}},
    {"long", {8, 512, 128, 4, 2, 16}},
    {"xlong", {1, 4096, 128, 4, 1, 16}},
};

// Multiply-adds x 2 of one training step: forward matmuls, and twice that for backward.
double model_gflop(const BenchConfig& c) {
  const double b = c.batch, l = c.seq_len, d = c.d_model;
  const double per_layer = 2 * b * l * d * (3 * d + d + 8 * d) + 4 * b * l * l * d;  // projections, FFN, attention
  const double forward = c.layers * per_layer + 2 * b * l * d * c.vocab;
  return 3 * forward / 1e9;
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The kernels in use, as JSON fields: the BLAS kernels, who chose them (the user through
// OPENBLAS_CORETYPE, xgrad or OpenBLAS) and its summary line; the precision of the
// products and, in bf16, what runs them.
void add_kernel_fields(tools::JsonLine& line, Precision precision) {
  line["blas_core"] = blas_core();
  line["blas_chosen_by"] = blas_core_chosen_by();
  line["blas"] = blas_summary();
  line["precision"] = precision_name(precision);
  if (precision == Precision::bfloat16) line["bf16"] = bf16_summary();
  line["denormals"] = flush_denormal() ? "flushed" : "kept";
}

// A result: one JSON line on stdout.
void print_line(const tools::JsonLine& line) { std::printf("%s\n", tools::json_text(line).c_str()); }

// One training step as the benchmarks time it: the loss under the precision's autocast,
// backward, the gradient norm of `clipped` (when given) clipped to 1, the update.
template <class Loss>
double training_step(optim::Optimizer& optimizer, Precision precision, Loss&& loss_of,
                     const std::vector<Tensor>* clipped = nullptr) {
  optimizer.zero_grad();
  Tensor loss;
  {
    const AutocastGuard autocast(precision);
    loss = loss_of();
  }
  loss.backward();
  optimizer.step(clipped ? optim::grad_norm_clip(*clipped, 1.0).factor : 1.0);  // clipped as the update reads them
  return loss.item();
}

// What --profile records: after the timed steps (which it leaves untouched), this many more.
struct ProfileRequest {
  std::string path;  // empty: none
  int steps = 0;
};

// PATH.json and PATH.png written, and the table printed on stderr (stdout keeps its one
// JSON line), with the profiled steps' time per step.
template <class Step>
void profile_steps(const ProfileRequest& request, const Step& step) {
  Profiler profiler;
  for (int i = 0; i < request.steps; ++i) {
    const ProfileStep profiled;
    step();
  }
  profiler.stop();
  std::fprintf(stderr, "profile of %d steps (%.3f ms per step while profiled), written to %s and %s:\n%s",
               request.steps, profiler.wall_ms() / request.steps, tools::profile_trace_path(request.path).c_str(),
               tools::profile_timeline_path(request.path).c_str(),
               tools::write_profile(profiler, request.path, flag(&BenchOptions::profile)).c_str());
}

// Times `step` (warmup untimed steps, then `steps`, or about 3 s when 0) and prints the
// JSON line; then profiles it when `profile` names a path.
template <class Step>
int time_steps(const std::string& name, const BenchConfig& c, int threads, int steps, int warmup, Precision precision,
               const ProfileRequest& profile, const Step& step) {
  for (int i = 0; i < warmup; ++i) step();
  if (steps <= 0) {
    const auto t = Clock::now();
    step();
    steps = std::max(3, std::min(200, static_cast<int>(3.0 / std::max(seconds_since(t), 1e-6))));
  }
  double loss = 0;
  const auto t = Clock::now();
  for (int i = 0; i < steps; ++i) loss = step();
  const double ms = seconds_since(t) / steps * 1e3;
  // One more step, recorded: the activations and gradients alive at once at its peak
  // (the weights and the optimizer's state, made before, not counted).
  Profiler recorded;
  step();
  recorded.stop();
  const double step_peak_mb = static_cast<double>(recorded.peak_bytes()) / (1 << 20);
  const double gflop = model_gflop(c);
  tools::JsonLine line{{"config", name},
                       {"batch", c.batch},
                       {"seq_len", c.seq_len},
                       {"d_model", c.d_model},
                       {"heads", c.heads},
                       {"layers", c.layers},
                       {"vocab", c.vocab},
                       {"threads", threads},
                       {"steps", steps},
                       {"ms_per_step", tools::decimals(ms, 3)},
                       {"peak_rss_mb", tools::decimals(peak_rss_mb(), 1)},
                       {"step_peak_mb", tools::decimals(step_peak_mb, 1)},
                       {"final_loss", tools::decimals(loss, 5)},
                       {"impl", str("xgrad-", version())},
                       {"model_gflop", tools::decimals(gflop, 4)},
                       {"gflops", tools::decimals(gflop / (ms / 1e3), 2)}};
  add_kernel_fields(line, precision);
  print_line(line);
  if (!profile.path.empty()) profile_steps(profile, step);
  return 0;
}

// torch_reference.py's step (Adam 1e-3) on xgrad's encoder layers; with `gpt2_recipe`
// (encoder-124m), gpt2's instead: AdamW on nanoGPT's decay groups, the gradient norm
// clipped to 1, so that the two shapes' steps do the same work.
int run_model(const std::string& name, const BenchConfig& c, int threads, int steps, int warmup, Precision precision,
              const ProfileRequest& profile, bool gpt2_recipe = false) {
  manual_seed(0);
  tools::SequenceModel model({.vocab = c.vocab,
                              .seq_len = c.seq_len,
                              .d_model = c.d_model,
                              .heads = c.heads,
                              .layers = c.layers,
                              .ff_width = 4 * c.d_model,
                              .dropout = 0.0,
                              .learned_positions = true});
  std::unique_ptr<optim::Optimizer> optimizer;
  if (gpt2_recipe)
    optimizer = std::make_unique<optim::AdamW>(tools::decay_groups(model, 0.1),
                                               optim::AdamWOptions{.lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95});
  else
    optimizer = std::make_unique<optim::Adam>(model.named_parameters(), optim::AdamOptions{.lr = 1e-3});
  const std::vector<Tensor> clipped = model.parameters();
  Generator gen(0);
  std::vector<std::int64_t> x(c.batch * c.seq_len), y(x.size());
  for (auto& t : x) t = static_cast<std::int64_t>(gen.below(c.vocab));
  for (std::size_t r = 0; r < c.batch; ++r)
    for (std::size_t i = 0; i < c.seq_len; ++i) y[r * c.seq_len + i] = x[r * c.seq_len + c.seq_len - 1 - i];
  const Indices inputs(x, {c.batch, c.seq_len}), targets(y, {c.batch, c.seq_len});
  const auto step = [&] {
    return training_step(
        *optimizer, precision, [&] { return cross_entropy(model.forward(inputs), targets); },
        gpt2_recipe ? &clipped : nullptr);
  };
  return time_steps(name, c, threads, steps, warmup, precision, profile, step);
}

// How many steps time_steps runs, on how many threads.
struct Timing {
  int threads, steps, warmup;
};

// Times next-token training of a causal language model as `xgrad-train --task lm` steps
// it: one batch of c's shape of random tokens (each window's next token the target),
// `adamw` as the caller set it up, the gradient norm clipped to 1.
int time_next_token(const std::string& name, const BenchConfig& c, models::CausalLM& model, optim::AdamW& adamw,
                    const Timing& timing, Precision precision, const ProfileRequest& profile) {
  Generator gen(0);
  std::vector<std::int64_t> x(c.batch * c.seq_len + 1);
  for (auto& t : x) t = static_cast<std::int64_t>(gen.below(c.vocab));
  const Indices inputs(std::vector<std::int64_t>(x.begin(), x.end() - 1), {c.batch, c.seq_len}),
      targets(std::vector<std::int64_t>(x.begin() + 1, x.end()), {c.batch, c.seq_len});
  const std::vector<Tensor> clipped = model.parameters();
  const auto step = [&] {
    return training_step(
        adamw, precision, [&] { return cross_entropy(model.forward(inputs), targets); }, &clipped);
  };
  return time_steps(name, c, timing.threads, timing.steps, timing.warmup, precision, profile, step);
}

// One step of `xgrad-train --task lm`'s default recipe (nanoGPT's shakespeare_char on
// CPU): a 4-layer GPT of width 128, 12 windows of 64 tokens over 73 characters, AdamW on
// nanoGPT's decay groups, the gradient norm clipped to 1.
int run_lm(int threads, int steps, int warmup, Precision precision, const ProfileRequest& profile) {
  const BenchConfig c{12, 64, 128, 4, 4, 73};
  manual_seed(0);
  tools::GPT model({.vocab = c.vocab, .block = c.seq_len, .layers = c.layers, .heads = c.heads, .d_model = c.d_model});
  optim::AdamW adamw(tools::decay_groups(model, 0.1), {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.99});
  return time_next_token("lm", c, model, adamw, {threads, steps, warmup}, precision, profile);
}

// One training step of Hugging Face's GPT-2 124M (models::GPT2LMHeadModel, tied head,
// GELU's tanh form, dropout off), as `lm` trains: AdamW on nanoGPT's decay groups, the
// gradient norm clipped to 1. Random tokens, each window's next token the target.
int run_gpt2(const BenchOptions& o, Precision precision, const ProfileRequest& profile) {
  const BenchConfig c{static_cast<std::size_t>(o.batch), static_cast<std::size_t>(o.seq_len), 768, 12, 12, 50257};
  manual_seed(0);
  models::GPT2Config config;
  config.embd_pdrop = config.attn_pdrop = config.resid_pdrop = 0.0;
  models::GPT2LMHeadModel model(config);
  model.set_recompute(o.recompute);
  if (o.embedding_std > 0) {
    Generator gen(1);
    model.transformer->wte->weight.set_data(Tensor::randn(model.transformer->wte->weight.shape(), gen) *
                                            o.embedding_std);
  }
  optim::AdamW adamw(tools::decay_groups(model, 0.1), {.lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95});
  const std::string name = o.recompute ? "gpt2-recompute" : o.embedding_std > 0 ? "gpt2-embedding-std" : "gpt2";
  return time_next_token(name, c, model, adamw, {o.threads, o.steps, o.warmup}, precision, profile);
}

// Gradients of `bytes` (float32) in parameters of 256 KiB, for timing the reducer alone:
// backward through sum(w * 1) is one cheap pass.
struct Gradients : nn::Module {
  explicit Gradients(std::size_t bytes) {
    const std::size_t per = 64 * 1024;
    for (std::size_t left = bytes / 4, i = 0; left > 0; ++i) {
      const std::size_t n = std::min(per, left);
      weights.push_back(register_parameter(str("w", i), Tensor::zeros({n})));
      left -= n;
    }
  }
  Tensor loss() const {
    Tensor total = sum(weights[0]);
    for (std::size_t i = 1; i < weights.size(); ++i) total = total + sum(weights[i]);
    return total;
  }
  std::vector<Tensor> weights;
};

// Under mpirun: the reducer's bandwidth for gradients of 100 KB to 400 MB (backward's
// own time subtracted), then the overlap in a training step of the lm model: backward
// with the reduction running beside it against backward alone plus the reduction alone.
int run_allreduce(const distributed::Communicator& world, int threads, int steps) {
  if (world.size() < 2)
    throw tools::UsageError(str(flag(&BenchOptions::config), " allreduce runs under mpirun -np 2 (or more)"));
  steps = steps > 0 ? steps : 5;
  const auto timed = [&](const auto& step) {  // median of `steps` runs, after one untimed
    step();
    std::vector<double> ms;
    for (int i = 0; i < steps; ++i) {
      world.barrier();
      const auto t = Clock::now();
      step();
      ms.push_back(seconds_since(t) * 1e3);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  const auto measure = [&](std::size_t bytes, std::size_t bucket_bytes) {
    Gradients g(bytes);
    const double backward = timed([&] { g.loss().backward(); });
    distributed::GradientReducer reducer(world, g, 1, {.bucket_bytes = bucket_bytes});
    const double reduced = timed([&] {
      reducer.begin_micro_batch();
      g.loss().backward();
      reducer.finish();
    });
    const double ms = std::max(reduced - backward, 1e-6);
    if (world.is_root())
      print_line({{"config", "allreduce"},
                  {"ranks", world.size()},
                  {"threads", threads},
                  {"bytes", bytes},
                  {"bucket_bytes", bucket_bytes},
                  {"buckets", reducer.num_buckets()},
                  {"ms", tools::decimals(ms, 3)},
                  {"gb_per_s", tools::decimals(static_cast<double>(bytes) / ms / 1e6, 3)},
                  {"impl", str("xgrad-", version())}});
  };
  const std::size_t default_bucket = distributed::ReducerOptions{}.bucket_bytes;
  for (const std::size_t bytes : {100'000ul, 1'000'000ul, 10'000'000ul, 100'000'000ul, 400'000'000ul})
    measure(bytes, default_bucket);
  for (const std::size_t bucket : {256ul << 10, 4ul << 20, 16ul << 20}) measure(10'000'000, bucket);  // the bucket size
  // Overlap in the lm model's step.
  manual_seed(0);
  tools::GPT model({.vocab = 73, .block = 64, .layers = 4, .heads = 4, .d_model = 128});
  Generator gen(0);
  std::vector<std::int64_t> x(12 * 64 + 1);
  for (auto& t : x) t = static_cast<std::int64_t>(gen.below(73));
  const Indices inputs(std::vector<std::int64_t>(x.begin(), x.end() - 1), {12, 64}),
      targets(std::vector<std::int64_t>(x.begin() + 1, x.end()), {12, 64});
  const auto zero = [&] {
    for (auto& [name, p] : model.named_parameters()) p.zero_grad();
  };
  const double alone = timed([&] {
    zero();
    cross_entropy(model.forward(inputs), targets).backward();
  });
  std::size_t bytes = 0;
  for (auto& [name, p] : model.named_parameters()) bytes += 4 * p.numel();
  Gradients same_size(bytes);
  double communication = 0;
  {
    const double backward = timed([&] { same_size.loss().backward(); });
    distributed::GradientReducer reducer(world, same_size);
    communication = timed([&] {
                      reducer.begin_micro_batch();
                      same_size.loss().backward();
                      reducer.finish();
                    }) -
                    backward;
  }
  distributed::GradientReducer reducer(world, model);
  const double together = timed([&] {
    zero();
    reducer.begin_micro_batch();
    cross_entropy(model.forward(inputs), targets).backward();
    reducer.finish();
  });
  if (world.is_root()) {
    const double hidden = std::clamp((alone + communication - together) / std::max(communication, 1e-9), 0.0, 1.0);
    print_line({{"config", "allreduce_overlap"},
                {"model", "lm"},
                {"ranks", world.size()},
                {"threads", threads},
                {"bytes", bytes},
                {"step_ms", tools::decimals(alone, 3)},
                {"communication_ms", tools::decimals(communication, 3)},
                {"step_with_reducer_ms", tools::decimals(together, 3)},
                {"hidden", tools::decimals(hidden, 2)},
                {"impl", str("xgrad-", version())}});
  }
  return 0;
}

// A 1024 x 1024 x 1024 product: OpenBLAS's sgemm through xgrad's panels, or in bf16 the
// mixed-precision kernels on operands rounded beforehand (the products' own rate).
int run_sgemm(int threads, int steps, Precision precision) {
  const std::size_t n = 1024;
  Generator gen(0);
  const Tensor a = Tensor::randn({n, n}, gen), b = Tensor::randn({n, n}, gen);
  std::vector<bfloat16> a16(n * n), b16(n * n);
  round_to_bfloat16(a.data<float>(), n, n, n, a16.data());
  round_to_bfloat16(b.data<float>(), n, n, n, b16.data());
  std::vector<float> c(n * n);
  const auto product = [&] {
    if (precision == Precision::bfloat16)
      gemm(false, false, n, n, n, 1.0f, a16.data(), n, b16.data(), n, 0.0f, c.data(), n);
    else
      gemm(false, false, n, n, n, 1.0f, a.data<float>(), n, b.data<float>(), n, 0.0f, c.data(), n);
  };
  // A few products first: each thread makes its kernels on its first call, and one product
  // need not reach every thread. Then the median product, which a stall of the VM (a
  // host's preemption, another process starting) does not move as it moves a mean.
  for (int i = 0; i < 3; ++i) product();
  steps = steps > 0 ? steps : 20;
  std::vector<double> times(static_cast<std::size_t>(steps));
  for (double& time : times) {
    const auto t = Clock::now();
    product();
    time = seconds_since(t);
  }
  std::nth_element(times.begin(), times.begin() + steps / 2, times.end());
  const double seconds = times[static_cast<std::size_t>(steps / 2)];
  tools::JsonLine line{{"config", "sgemm"},
                       {"n", n},
                       {"threads", threads},
                       {"steps", steps},
                       {"ms_per_gemm", tools::decimals(seconds * 1e3, 3)},
                       {"gflops", tools::decimals(2.0 * n * n * n / seconds / 1e9, 2)},
                       {"impl", str("xgrad-", version())}};
  add_kernel_fields(line, precision);
  print_line(line);
  return 0;
}

// The optimizers' steps over GPT-2 124M's parameters (random gradients) as bytes read and
// written per second, beside the machine's copy bandwidth in the same run: a = s a over
// twice the parameters' floats, in the pool's chunks as the optimizers run, counted the
// same way (bytes read + bytes written). In place, as the optimizers write only arrays
// they read: a copy into another array would also read every line it writes (the cache's
// read for ownership), a third more traffic than it counts. Medians of `steps` runs.
int run_optimizer(int threads, int steps) {
  steps = steps > 0 ? steps : 7;
  manual_seed(0);
  models::GPT2Config config;
  models::GPT2LMHeadModel model(config);
  std::size_t count = 0;
  Generator gen(2);
  for (auto& [name, p] : model.named_parameters()) {
    p.set_grad(Tensor::randn(p.shape(), gen) * 1e-3);
    count += p.numel();
  }
  const auto median_seconds = [&](const auto& run) {
    run();  // untimed: state made, pages touched
    std::vector<double> s;
    for (int i = 0; i < steps; ++i) {
      const auto t = Clock::now();
      run();
      s.push_back(seconds_since(t));
    }
    std::sort(s.begin(), s.end());
    return s[s.size() / 2];
  };
  // Copy bandwidth: 2 x 4 x count bytes read and as many written, in the pool's chunks.
  const std::size_t n = 2 * count;
  std::vector<float> values(n, 1.0f);
  volatile float unknown_scale = 1.0f;  // not folded away
  const float scale = unknown_scale;
  const double copy_s = median_seconds([&] {
    parallel_for_chunks(n, kElementsPerChunk, 1.0, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) values[i] *= scale;
    });
  });
  const double copy_gb_per_s = 2.0 * 4.0 * static_cast<double>(n) / copy_s / 1e9;
  const auto report = [&](const char* name, optim::Optimizer& optimizer, int arrays_read, int arrays_written) {
    const double s = median_seconds([&] { optimizer.step(); });
    const double bytes = 4.0 * static_cast<double>(count) * (arrays_read + arrays_written);
    print_line({{"config", "optimizers"},
                {"algorithm", name},
                {"parameters", count},
                {"threads", threads},
                {"steps", steps},
                {"ms_per_step", tools::decimals(s * 1e3, 3)},
                {"bytes_per_parameter", 4 * (arrays_read + arrays_written)},
                {"gb_per_s", tools::decimals(bytes / s / 1e9, 2)},
                {"copy_gb_per_s", tools::decimals(copy_gb_per_s, 2)},
                {"of_copy", tools::decimals(bytes / s / 1e9 / copy_gb_per_s, 3)},
                {"impl", str("xgrad-", version())}});
  };
  {
    optim::AdamW adamw(model.named_parameters(), {.lr = 1e-4, .weight_decay = 0.1});
    report("AdamW", adamw, 4, 3);  // reads p, g, m, v; writes p, m, v
  }
  {
    optim::Adam adam(model.named_parameters(), {.lr = 1e-4});
    report("Adam", adam, 4, 3);
  }
  {
    optim::SGD sgd(model.named_parameters(), {.lr = 1e-4, .momentum = 0.9});
    report("SGD momentum", sgd, 3, 2);  // reads p, g, buffer; writes p, buffer
  }
  return 0;
}

int run_overhead(int threads, int steps) {
  const int chain = 10000;
  steps = steps > 0 ? steps : 5;
  Tensor x = Tensor::ones({4}).requires_grad_();
  double best = 1e30;
  for (int s = 0; s < steps; ++s) {
    const auto t = Clock::now();
    Tensor y = x;
    for (int i = 0; i < chain; ++i) y = y * 1.0001;
    sum(y).backward();
    x.zero_grad();
    best = std::min(best, seconds_since(t));
  }
  print_line({{"config", "overhead"},
              {"chain", chain},
              {"threads", threads},
              {"steps", steps},
              {"us_per_op", tools::decimals(best / (chain + 1) * 1e6, 3)},
              {"impl", str("xgrad-", version())}});
  return 0;
}

// Runs the configuration; every error (a bad flag, a failed write) is one line on stderr
// and exit status 2.
int run(const BenchOptions& o, Precision precision, const ProfileRequest& profile) {
  const std::string& config = o.config;
  const int threads = o.threads, steps = o.steps, warmup = o.warmup;
  set_num_threads(threads);
  set_flush_denormal(!o.keep_denormals);
  if (config == "allreduce") {
    const distributed::Communicator world;
    return run_allreduce(world, threads, steps);
  }
  // Every rank would time its own copy on the same cores, each printing its own figure.
  if (distributed::launched_by_mpirun())
    throw tools::UsageError(str(flag(&BenchOptions::config), " ", config,
                                " runs alone, not under mpirun (each rank would time its own run on the same ",
                                "cores; only allreduce runs under mpirun)"));
  if (config == "sgemm") return run_sgemm(threads, steps, precision);
  if (config == "overhead") return run_overhead(threads, steps);
  if (config == "optimizers") return run_optimizer(threads, steps);
  if (config == "lm") return run_lm(threads, steps, warmup, precision, profile);
  if (config == "gpt2") return run_gpt2(o, precision, profile);
  if (config == "encoder-124m") {
    const BenchConfig c{static_cast<std::size_t>(o.batch), static_cast<std::size_t>(o.seq_len), 768, 12, 12, 50257};
    return run_model(config, c, threads, steps, warmup, precision, profile, /*gpt2_recipe=*/true);
  }
  return run_model(config, kConfigs.at(config), threads, steps, warmup, precision, profile);
}

// GPT-2 124M's shape at --batch x --seq-len: positions it has (1,024), and the memory a
// step needs (its parameters with AdamW's state, the activations backward keeps, as
// xgrad-train estimates them), refused before any of it is made.
void check_gpt2_shape(const BenchOptions& o) {
  if (o.config != "gpt2" && o.config != "encoder-124m") return;
  const models::GPT2Config gpt2;
  if (static_cast<std::size_t>(o.seq_len) > gpt2.n_positions)
    throw tools::SettingError(flag(&BenchOptions::seq_len),
                              str(" ", o.seq_len, " is more than the ", gpt2.n_positions, " positions of GPT-2 124M"));
  const double d = static_cast<double>(gpt2.n_embd), ff = 4 * d, layers = static_cast<double>(gpt2.n_layer),
               vocab = static_cast<double>(gpt2.vocab_size), tokens = static_cast<double>(o.batch) * o.seq_len;
  const double state = 124.4e6 * 4 * 4 * (o.precision == "bf16" ? 1.125 : 1.0);
  const double activations = tokens * (layers * (12 * d + 3 * ff) * 2 + 4 * vocab + 4 * d) * 4;
  const auto available = static_cast<double>(usable_memory_bytes());
  if (state + activations > available)
    throw tools::SettingError(flag(&BenchOptions::batch),
                              str(" ", o.batch, " x ", flag(&BenchOptions::seq_len), " ", o.seq_len, " needs about ",
                                  tools::gib(state + activations), " of memory, more than the ", tools::gib(available),
                                  " this process may use"));
}

}  // namespace

int main(int argc, char** argv) {
  return tools::run_tool("xgrad-bench", [&] {
    BenchOptions o;
    tools::Given given;
    if (const std::optional<int> printed = tools::settings_of<BenchOptions>().parse(argc, argv, o, given))
      return *printed;
    tools::settings_of<BenchOptions>().check(o);
    tools::settings_of<BenchOptions>().refuse_unused(o, given);
    check_gpt2_shape(o);
    if (!o.profile.empty()) {
      tools::check_output_file(flag(&BenchOptions::profile), tools::profile_trace_path(o.profile),
                               {tools::kTraceOpening}, "a trace of xgrad's profiler");
      tools::check_output_file(flag(&BenchOptions::profile), tools::profile_timeline_path(o.profile),
                               {tools::kPngSignature}, "a PNG");
    }
    return run(o, o.precision == "bf16" ? Precision::bfloat16 : Precision::float32, {o.profile, o.profile_steps});
  });
}
