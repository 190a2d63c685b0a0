// The language model (--task lm): a character-level GPT predicting the next byte of a
// text, evaluated on the same windows of each split every time.

#include <cmath>
#include <ostream>

#include "display.hpp"
#include "gpt.hpp"
#include "tasks.hpp"
#include "workload.hpp"
#include "xgrad/autograd/ops.hpp"

namespace tools {

using namespace xgrad;

namespace {

constexpr std::size_t kSampleBytes = 300;
const SampleOptions kSampling{.temperature = 0.8, .top_k = 200};  // nanoGPT's sample.py

class LanguageWorkload : public Workload {
 public:
  LanguageWorkload(const Config& c, std::shared_ptr<const TextCorpus> corpus)
      : config_(c),
        corpus_(std::move(corpus)),
        model_({.vocab = corpus_->vocabulary().size(),
                .block = static_cast<std::size_t>(c.seq_len),
                .layers = static_cast<std::size_t>(c.layers),
                .heads = static_cast<std::size_t>(c.heads),
                .d_model = static_cast<std::size_t>(c.d_model)}) {}

  nn::Module& model() override { return model_; }

  Tensor training_loss(std::int64_t step, std::size_t micro, std::size_t micro_batches) override {
    Generator data = stream_generator(config_.seed, 1, static_cast<std::uint64_t>(step));
    const Batch batch = slice_rows(corpus_->batch(Split::train, static_cast<std::size_t>(config_.batch),
                                                  static_cast<std::size_t>(config_.seq_len), data),
                                   micro, micro_batches);
    return cross_entropy(model_.forward(batch.inputs), batch.targets);
  }

  std::optional<Evaluation> evaluate(std::int64_t step, double recent_train_loss,
                                     const std::function<bool()>& interrupted) override {
    (void)step, (void)recent_train_loss;  // the same windows every time
    const std::optional<double> train_loss = mean_loss(Split::train, 5, interrupted);
    const std::optional<double> val_loss = train_loss ? mean_loss(Split::validation, 2, interrupted) : std::nullopt;
    if (!val_loss) return std::nullopt;
    return Evaluation{*train_loss, *val_loss, std::nullopt, std::nullopt};
  }

  void print_samples(std::ostream& os, std::int64_t step) override {
    Generator gen = stream_generator(config_.seed, 4, static_cast<std::uint64_t>(step));
    const std::vector<std::int64_t> prompt = {prompt_token()};
    const std::vector<std::int64_t> text = generate(model_, prompt, kSampleBytes, kSampling, gen);
    os << "sample (" << kSampleBytes << " bytes, temperature " << kSampling.temperature << "):\n"
       << corpus_->decode(text) << "\n";
  }

  // The attention maps are too big to read in a terminal: drawn only.
  void show_attention(std::ostream& os, const std::string& png) override {
    if (png.empty()) return;
    NoGradGuard no_grad;
    model_.eval();
    Generator gen = stream_generator(config_.seed, 4, 0);
    const std::vector<std::int64_t> first =
        corpus_->batch(Split::validation, 1, static_cast<std::size_t>(config_.seq_len), gen).inputs.values;
    GPTBlock& last = model_.block(model_.options.layers - 1);
    last.keep_attention = true;
    model_.forward(Indices(first, {1, first.size()}));
    const Tensor maps = squeeze(last.last_attention, 0);  // [H, T, T]
    last.keep_attention = false;
    last.last_attention = Tensor();
    model_.train();
    std::vector<std::string> labels;
    for (const std::int64_t t : first) labels.push_back(printable(corpus_->vocabulary()[static_cast<std::size_t>(t)]));
    write_attention_png(png, flag(&Config::attention_png), maps, labels,
                        str("xgrad-train ", flag(&Config::task), " lm: attention of the last layer on validation text"),
                        "_ is a space, $ a line break, ? another byte");
    os << "wrote the attention maps to " << png << "\n";
  }

  void add_metadata(Metadata& metadata) const override {
    metadata["lm.vocabulary"] = vocabulary_to_hex(corpus_->vocabulary());
  }

 private:
  // The mean loss over eval-batches windows of a split, drawn from a generator of their
  // own: the same windows at every evaluation.
  std::optional<double> mean_loss(Split split, std::uint64_t stream, const std::function<bool()>& interrupted) {
    NoGradGuard no_grad;
    model_.eval();
    Generator gen = stream_generator(config_.seed, stream, 0);
    double sum = 0;
    for (int b = 0; b < config_.eval_batches; ++b) {
      if (interrupted()) {
        model_.train();
        return std::nullopt;
      }
      const Batch batch = corpus_->batch(split, static_cast<std::size_t>(config_.batch),
                                         static_cast<std::size_t>(config_.seq_len), gen);
      sum += cross_entropy(model_.forward(batch.inputs), batch.targets).item();
    }
    model_.train();
    return sum / config_.eval_batches;
  }

  // Samples start from a newline (the start of a line of the text) when the text has one.
  std::int64_t prompt_token() const {
    const auto& v = corpus_->vocabulary();
    const auto at = std::lower_bound(v.begin(), v.end(), '\n');
    return at != v.end() && *at == '\n' ? at - v.begin() : 0;
  }

  static std::string printable(std::uint8_t b) {
    if (b == '\n') return "$";
    if (b == ' ') return "_";
    if (b < 32 || b >= 127) return "?";
    return std::string(1, static_cast<char>(b));
  }

  Config config_;
  std::shared_ptr<const TextCorpus> corpus_;
  GPT model_;
};

}  // namespace

std::unique_ptr<Workload> make_language_workload(const Config& config, std::shared_ptr<const TextCorpus> corpus) {
  return std::make_unique<LanguageWorkload>(config, std::move(corpus));
}

}  // namespace tools
