// The toy sequence tasks (copy, reverse, sort, add): an encoder predicts a token at every
// position of fresh random sequences, evaluated greedily on held-out ones.

#include <algorithm>
#include <ostream>

#include "display.hpp"
#include "model.hpp"
#include "report.hpp"
#include "tasks.hpp"
#include "workload.hpp"
#include "xgrad/autograd/ops.hpp"

namespace tools {

using namespace xgrad;

namespace {

std::vector<std::int64_t> argmax_rows(const Tensor& logits, std::size_t classes) {
  const std::vector<double> z = logits.to_vector();
  std::vector<std::int64_t> best(z.size() / classes);
  for (std::size_t r = 0; r < best.size(); ++r) {
    const auto row = z.begin() + static_cast<std::ptrdiff_t>(r * classes);
    best[r] = std::max_element(row, row + static_cast<std::ptrdiff_t>(classes)) - row;
  }
  return best;
}

std::vector<std::int64_t> row(const std::vector<std::int64_t>& values, std::size_t r, std::size_t length) {
  return {values.begin() + static_cast<std::ptrdiff_t>(r * length),
          values.begin() + static_cast<std::ptrdiff_t>((r + 1) * length)};
}

class ToyWorkload : public Workload {
 public:
  explicit ToyWorkload(const Config& c)
      : config_(c),
        length_(static_cast<std::size_t>(c.seq_len)),
        vocab_(static_cast<std::size_t>(c.vocab)),
        model_({.vocab = vocab_,
                .seq_len = length_,
                .d_model = static_cast<std::size_t>(c.d_model),
                .heads = static_cast<std::size_t>(c.heads),
                .layers = static_cast<std::size_t>(c.layers),
                .ff_width = static_cast<std::size_t>(c.ff_width()),
                .dropout = c.dropout,
                .learned_positions = c.positions == "learned"}) {}

  nn::Module& model() override { return model_; }
  std::string sizes() const override { return flag_sizes(config_); }

  Tensor training_loss(std::int64_t step, std::size_t micro, std::size_t micro_batches) override {
    Generator data = stream_generator(config_.seed, 1, static_cast<std::uint64_t>(step));
    const Batch batch = slice_rows(
        make_batch(config_.task, static_cast<std::size_t>(config_.batch), length_, vocab_, data), micro, micro_batches);
    return cross_entropy(model_.forward(batch.inputs), batch.targets, kIgnore);
  }

  // Greedy prediction at every position of eval-size fresh held-out sequences.
  std::optional<Evaluation> evaluate(std::int64_t step, double recent_train_loss,
                                     const std::function<bool()>& interrupted) override {
    NoGradGuard no_grad;
    model_.eval();
    Generator gen = stream_generator(config_.seed, 2, static_cast<std::uint64_t>(step));
    const auto size = static_cast<std::size_t>(config_.eval_size);
    std::size_t tokens = 0, correct_tokens = 0, exact = 0;
    double loss_sum = 0;
    for (std::size_t done = 0; done < size;) {
      if (interrupted()) {
        model_.train();
        return std::nullopt;
      }
      const std::size_t n = std::min<std::size_t>(500, size - done);
      const Batch b = make_batch(config_.task, n, length_, vocab_, gen);
      const Tensor logits = model_.forward(b.inputs);
      const std::vector<std::int64_t> predicted = argmax_rows(logits, vocab_);
      const std::size_t counted = static_cast<std::size_t>(
          std::count_if(b.targets.values.begin(), b.targets.values.end(), [](std::int64_t t) { return t != kIgnore; }));
      loss_sum += cross_entropy(logits, b.targets, kIgnore).item() * static_cast<double>(counted);
      for (std::size_t r = 0; r < n; ++r) {
        bool all = true;
        for (std::size_t i = r * length_; i < (r + 1) * length_; ++i) {
          if (b.targets.values[i] == kIgnore) continue;
          ++tokens;
          const bool right = predicted[i] == b.targets.values[i];
          correct_tokens += right;
          all = all && right;
        }
        exact += all;
      }
      done += n;
    }
    model_.train();
    return Evaluation{recent_train_loss, loss_sum / static_cast<double>(tokens),
                      static_cast<double>(correct_tokens) / static_cast<double>(tokens),
                      static_cast<double>(exact) / static_cast<double>(size), std::nullopt};
  }

  // Three held-out sequences: input, prediction and target.
  void print_samples(std::ostream& os, std::int64_t step) override {
    (void)step;  // always the same three, to watch them improve
    NoGradGuard no_grad;
    model_.eval();
    const Batch samples = held_out_samples();
    const std::vector<std::int64_t> predicted = argmax_rows(model_.forward(samples.inputs), vocab_);
    model_.train();
    os << "held-out samples:\n";
    for (std::size_t r = 0; r < 3; ++r) {
      print_sample(os, row(samples.inputs.values, r, length_), row(predicted, r, length_),
                   row(samples.targets.values, r, length_), vocab_, kIgnore);
      os << "\n";
    }
  }

  void show_attention(std::ostream& os, const std::string& png) override {
    NoGradGuard no_grad;
    model_.eval();
    const std::vector<std::int64_t> first = row(held_out_samples().inputs.values, 0, length_);
    auto& attention = *model_.last_layer().self_attn;
    attention.set_keep_attention(true);
    model_.forward(Indices(first, {1, length_}));
    const Tensor maps = squeeze(attention.last_attention(), 0);  // [H, L, L]
    attention.set_keep_attention(false);
    model_.train();
    os << "attention in the last layer for the first sample (rows: queries, each scaled to its maximum):\n";
    print_attention(os, maps, first, vocab_);
    if (!png.empty()) {
      std::vector<std::string> labels;
      for (const std::int64_t t : first) labels.push_back(token_text({t}, vocab_));
      write_attention_png(png, flag(&Config::attention_png), maps, labels,
                          str("xgrad-train ", flag(&Config::task), " ", config_.task,
                              ": attention of the last layer on a held-out input"));
      os << "wrote the attention maps to " << png << "\n";
    }
  }

 private:
  Batch held_out_samples() const {
    Generator gen = stream_generator(config_.seed, 4, 0);
    return make_batch(config_.task, 3, length_, vocab_, gen);
  }

  Config config_;
  std::size_t length_, vocab_;
  SequenceModel model_;
};

}  // namespace

std::unique_ptr<Workload> make_toy_workload(const Config& config) { return std::make_unique<ToyWorkload>(config); }

}  // namespace tools
