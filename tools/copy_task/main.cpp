// xgrad-copy-task: the Annotated Transformer's first example. An encoder-decoder
// (nn::Transformer, pre-LN as the Annotated Transformer's layers, with token embeddings
// scaled by sqrt(d_model), sinusoidal positions and a linear generator) learns to copy
// random sequences, then decodes greedily: one token at a time, each step attending to
// the encoder's memory and causally to what it has written so far.
//
//   xgrad-copy-task                      # about ten seconds on two cores, 99% exact
//   xgrad-copy-task --epochs 20 --d-model 128 --post-ln

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "cli.hpp"
#include "flags.hpp"
#include "memory.hpp"
#include "numbers.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/nn/nn.hpp"
#include "xgrad/optim/optim.hpp"

using namespace xgrad;

namespace {

constexpr std::int64_t kStart = 1;  // every sequence begins with it, as in the Annotated Transformer

struct CopyTaskOptions {
  std::size_t epochs = 0, steps_per_epoch = 0, batch = 0, seq_len = 0, vocab = 0;
  std::size_t d_model = 0, heads = 0, layers = 0, dim_feedforward = 0, warmup = 0, eval_sequences = 0;
  double dropout = 0, label_smoothing = 0, require_accuracy = 0;
  std::uint64_t seed = 0;
  int threads = 0;
  bool post_ln = false;
};

// xgrad-copy-task's table: one row per flag (tools/common/settings.hpp).
tools::Settings<CopyTaskOptions> settings_table(std::type_identity<CopyTaskOptions>) {
  using namespace tools::setting;
  return {
      "xgrad-copy-task",
      Text::of("trains the Annotated Transformer's encoder-decoder to copy sequences, then decodes greedily."),
      {
          whole(&CopyTaskOptions::epochs, "epochs").help("epochs of training").at_least(1).fallback(20),
          whole(&CopyTaskOptions::steps_per_epoch, "steps-per-epoch").help("steps per epoch").at_least(1).fallback(20),
          bind(&CopyTaskOptions::batch, flags::batch()).fallback(80),
          bind(&CopyTaskOptions::seq_len, flags::seq_len())
              .help("tokens per sequence, the start token included")
              .at_least(2)  // the start token and one to copy
              .fallback(10),
          bind(&CopyTaskOptions::vocab, flags::vocab())
              .help("vocabulary size: the start token, and tokens from 2")
              .at_least(3)
              .fallback(11),
          bind(&CopyTaskOptions::d_model, flags::d_model()).fallback(64),
          bind(&CopyTaskOptions::heads, flags::heads()).fallback(4),
          bind(&CopyTaskOptions::layers, flags::layers())
              .help("encoder layers, and as many decoder layers")
              .fallback(2),
          bind(&CopyTaskOptions::dim_feedforward, flags::ff()).help("feed-forward width").at_least(1).fallback(128),
          bind(&CopyTaskOptions::warmup, flags::warmup())
              .help("warmup steps of the Noam rate")
              .at_least(1)
              .fallback(400),
          whole(&CopyTaskOptions::eval_sequences, "eval-sequences")
              .help("held-out sequences decoded after each epoch")
              .at_least(1)
              .fallback(200),
          bind(&CopyTaskOptions::dropout, flags::dropout())
              .help("dropout probability, [0, 0.99]")
              .at_most(0.99)
              .fallback(0.1),
          real(&CopyTaskOptions::label_smoothing, "label-smoothing")
              .help("label smoothing of the loss, [0, 1]")
              .at_least(0)
              .at_most(1)
              .fallback(0.0),
          toggle(&CopyTaskOptions::post_ln, "post-ln").help("post-LN layers (PyTorch's default) instead of pre-LN"),
          bind(&CopyTaskOptions::seed, flags::seed()).help("seed of the weights and the data").fallback(1),
          bind(&CopyTaskOptions::threads, flags::threads()).fallback(0),
          real(&CopyTaskOptions::require_accuracy, "require-accuracy")
              .help("exit with status 1 when the last epoch copies less than this fraction exactly, [0, 1]")
              .at_least(0)
              .at_most(1)
              .fallback(0.0),
      }};
}

using tools::flag;

class CopyModel : public nn::Module {
 public:
  explicit CopyModel(const CopyTaskOptions& o) : scale_(std::sqrt(static_cast<double>(o.d_model))) {
    src_embed = register_module("src_embed", std::make_shared<nn::Embedding>(o.vocab, o.d_model));
    tgt_embed = register_module("tgt_embed", std::make_shared<nn::Embedding>(o.vocab, o.d_model));
    position = register_module("position", std::make_shared<nn::PositionalEncoding>(o.d_model, o.seq_len, o.dropout));
    nn::TransformerOptions t;
    t.d_model = o.d_model;
    t.nhead = o.heads;
    t.num_encoder_layers = t.num_decoder_layers = o.layers;
    t.dim_feedforward = o.dim_feedforward;
    t.dropout = o.dropout;
    t.norm_first = !o.post_ln;
    transformer = register_module("transformer", std::make_shared<nn::Transformer>(t));
    generator = register_module("generator", std::make_shared<nn::Linear>(o.d_model, o.vocab));
    // As the Annotated Transformer: every matrix Xavier-uniform, the embeddings too (at
    // N(0, 1) times sqrt(d_model) they would drown the positions).
    for (auto& [name, p] : named_parameters())
      if (p.dim() > 1) nn::init::xavier_uniform_(p);
  }

  Tensor encode(const Indices& src) { return transformer->encoder->forward(embed(*src_embed, src)); }

  // Logits [N, T, vocab] for the next token after each position of tgt.
  Tensor decode(const Tensor& memory, const Indices& tgt) {
    nn::AttentionArgs causal;
    causal.is_causal = true;
    return generator->forward(transformer->decoder->forward(embed(*tgt_embed, tgt), memory, causal));
  }

  std::shared_ptr<nn::Embedding> src_embed, tgt_embed;
  std::shared_ptr<nn::PositionalEncoding> position;
  std::shared_ptr<nn::Transformer> transformer;
  std::shared_ptr<nn::Linear> generator;

 private:
  Tensor embed(nn::Embedding& table, const Indices& ids) { return position->forward(table(ids) * scale_); }
  double scale_;
};

// `count` random sequences: the start token, then tokens drawn from [2, vocab).
Indices random_sequences(std::size_t count, const CopyTaskOptions& o, Generator& gen) {
  std::vector<std::int64_t> ids(count * o.seq_len);
  for (std::size_t i = 0; i < ids.size(); ++i)
    ids[i] = i % o.seq_len == 0 ? kStart : static_cast<std::int64_t>(2 + gen.below(o.vocab - 2));
  return Indices(std::move(ids), {count, o.seq_len});
}

// Columns [begin, end) of every row.
Indices columns(const Indices& rows, std::size_t begin, std::size_t end) {
  const std::size_t n = rows.shape[0], width = rows.shape[1];
  std::vector<std::int64_t> out;
  for (std::size_t r = 0; r < n; ++r)
    out.insert(out.end(), rows.values.begin() + static_cast<std::ptrdiff_t>(r * width + begin),
               rows.values.begin() + static_cast<std::ptrdiff_t>(r * width + end));
  return Indices(std::move(out), {n, end - begin});
}

// Greedy decoding: start from the start token and append the most likely next token
// until the output is as long as the source.
Indices greedy_decode(CopyModel& model, const Indices& src) {
  NoGradGuard no_grad;
  const std::size_t n = src.shape[0], length = src.shape[1];
  const Tensor memory = model.encode(src);
  Indices out(std::vector<std::int64_t>(n, kStart), {n, 1});
  for (std::size_t t = 1; t < length; ++t) {
    const Tensor logits = model.decode(memory, out);  // [n, t, vocab]
    const Indices next = argmax(squeeze(slice(logits, 1, t - 1, t), 1), -1);
    std::vector<std::int64_t> grown;
    for (std::size_t r = 0; r < n; ++r) {
      grown.insert(grown.end(), out.values.begin() + static_cast<std::ptrdiff_t>(r * t),
                   out.values.begin() + static_cast<std::ptrdiff_t>((r + 1) * t));
      grown.push_back(next.values[r]);
    }
    out = Indices(std::move(grown), {n, t + 1});
  }
  return out;
}

double copy_accuracy(CopyModel& model, const Indices& src) {
  const Indices decoded = greedy_decode(model, src);
  std::size_t exact = 0;
  for (std::size_t r = 0; r < src.shape[0]; ++r)
    exact += std::equal(decoded.values.begin() + static_cast<std::ptrdiff_t>(r * src.shape[1]),
                        decoded.values.begin() + static_cast<std::ptrdiff_t>((r + 1) * src.shape[1]),
                        src.values.begin() + static_cast<std::ptrdiff_t>(r * src.shape[1]));
  return static_cast<double>(exact) / static_cast<double>(src.shape[0]);
}

// Every flag in range, and the combination.
void check_options(const CopyTaskOptions& o) {
  tools::settings_of<CopyTaskOptions>().check(o);
  if (o.d_model % o.heads != 0)
    throw tools::SettingError(flag(&CopyTaskOptions::heads),
                              str(" ", o.heads, " must divide ", flag(&CopyTaskOptions::d_model), " ", o.d_model));
}

// The run's memory (float32), estimated before anything is made: the parameters (two
// embeddings, the positions' table, per layer of the encoder 4 d^2 of attention and of
// the decoder 8, each 2 d ff of feed-forward, the generator) with their gradient and
// Adam's two moments; what a step keeps for backward, about 20 d + 3 ff values per token
// and layer of each stack, twice over with their gradients, and the logits; the
// held-out decoding (no graph: one layer's values at a time, the logits). A run that
// does not fit the machine is refused naming the flags, rather than hanging or failing
// half-way with bad_alloc.
void check_memory(const CopyTaskOptions& o) {
  const double d = static_cast<double>(o.d_model), ff = static_cast<double>(o.dim_feedforward);
  const double length = static_cast<double>(o.seq_len), vocab = static_cast<double>(o.vocab);
  const double layers = static_cast<double>(o.layers);
  const double parameters = 3 * vocab * d + length * d + layers * (12 * d * d + 4 * d * ff + 20 * d + 2 * ff);
  const double state = parameters * 4 * 4;
  const double per_token = 2 * layers * (20 * d + 3 * ff) * 2 + 4 * vocab + 4 * d;
  const double training = static_cast<double>(o.batch) * length * per_token * 4;
  const double evaluation = static_cast<double>(o.eval_sequences) * length * (8 * d + ff + 2 * vocab + 2) * 4;
  const double needed = state + std::max(training, evaluation),
               available = static_cast<double>(xgrad::usable_memory_bytes());
  if (needed <= available) return;
  throw tools::UsageError(
      str("the run needs about ", tools::gib(needed), " of memory, more than the ", tools::gib(available),
          " this process may use: ", tools::gib(state), " for ", tools::count_text(parameters),
          " parameters and their optimizer state (", flag(&CopyTaskOptions::vocab), " ", o.vocab, ", ",
          flag(&CopyTaskOptions::d_model), " ", o.d_model, ", ", flag(&CopyTaskOptions::layers), " ", o.layers, ", ",
          flag(&CopyTaskOptions::dim_feedforward), " ", o.dim_feedforward, ", ", flag(&CopyTaskOptions::seq_len), " ",
          o.seq_len, "), ", tools::gib(training), " for a step (", flag(&CopyTaskOptions::batch), " ", o.batch, " x ",
          flag(&CopyTaskOptions::seq_len), " ", o.seq_len, "), ", tools::gib(evaluation), " for decoding (",
          flag(&CopyTaskOptions::eval_sequences), " ", o.eval_sequences, " x ", flag(&CopyTaskOptions::seq_len), " ",
          o.seq_len, ")"));
}

std::string joined(const std::vector<std::int64_t>& ids) {
  std::string s;
  for (std::int64_t id : ids) {
    if (!s.empty()) s += ' ';
    s += std::to_string(id);
  }
  return s;
}

int run(const CopyTaskOptions& o) {
  if (o.threads > 0) set_num_threads(o.threads);
  manual_seed(o.seed);
  CopyModel model(o);
  // The Annotated Transformer's optimizer: Adam(0.9, 0.98, 1e-9) under the Noam rate.
  optim::Adam adam(model.named_parameters(), {.lr = 1.0, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-9});
  optim::NoamLR schedule(adam, static_cast<std::int64_t>(o.d_model), static_cast<std::int64_t>(o.warmup));
  CrossEntropyOptions loss_options;
  loss_options.label_smoothing = o.label_smoothing;
  Generator data(o.seed), held_out(o.seed + 1);
  const Indices test = random_sequences(o.eval_sequences, o, held_out);
  double accuracy = 0;
  for (std::size_t epoch = 1; epoch <= o.epochs; ++epoch) {
    model.train();
    double total = 0;
    for (std::size_t step = 0; step < o.steps_per_epoch; ++step) {
      const Indices src = random_sequences(o.batch, o, data);
      // The target is the source: the decoder reads it shifted right by one.
      const Tensor logits = model.decode(model.encode(src), columns(src, 0, o.seq_len - 1));
      const Tensor loss = cross_entropy(logits, columns(src, 1, o.seq_len), loss_options);
      adam.zero_grad();
      loss.backward();
      adam.step();
      schedule.step();
      total += loss.item();
    }
    model.eval();
    accuracy = copy_accuracy(model, test);
    std::printf("epoch %zu: train loss %.4f, greedy copies exact %.1f%% of %zu held-out sequences\n", epoch,
                total / static_cast<double>(o.steps_per_epoch), 100 * accuracy, o.eval_sequences);
    tools::check_stdout();
  }
  std::vector<std::int64_t> counting(o.seq_len);
  for (std::size_t i = 0; i < o.seq_len; ++i) counting[i] = i == 0 ? kStart : 2 + (i - 1) % (o.vocab - 2);
  const Indices example(counting, {1, o.seq_len});
  std::printf("source:  %s\ndecoded: %s\n", joined(counting).c_str(),
              joined(greedy_decode(model, example).values).c_str());
  tools::check_stdout();
  if (accuracy < o.require_accuracy) {
    // Both in full: a requirement a hair above the accuracy must not read as equal to it.
    std::fprintf(stderr, "xgrad-copy-task: copy accuracy %s (%.0f of %zu held-out sequences) is below %s %s\n",
                 tools::shortest_text(accuracy).c_str(), accuracy * static_cast<double>(o.eval_sequences),
                 o.eval_sequences, flag(&CopyTaskOptions::require_accuracy).dashed().c_str(),
                 tools::shortest_text(o.require_accuracy).c_str());
    return 1;
  }
  return 0;
}

}  // namespace

// A bad flag, a run too large for the machine or a failed write is one line on stderr
// and exit status 2.
int main(int argc, char** argv) {
  return tools::run_tool("xgrad-copy-task", [&] {
    CopyTaskOptions o;
    tools::Given given;
    if (const std::optional<int> printed = tools::settings_of<CopyTaskOptions>().parse(argc, argv, o, given))
      return *printed;
    check_options(o);
    check_memory(o);
    return run(o);
  });
}
