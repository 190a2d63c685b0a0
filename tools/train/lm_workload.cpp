// The language model (--task lm): a GPT predicting the next token (a byte of a text, or
// a tokenizer's token from shards), evaluated on the same windows of each split every
// time.

#include <cmath>
#include <ostream>

#include "display.hpp"
#include "gpt.hpp"
#include "language_model.hpp"
#include "report.hpp"
#include "tasks.hpp"
#include "workload.hpp"
#include "xgrad/autograd/ops.hpp"
#include "xgrad/models/pretrained.hpp"

namespace tools {

using namespace xgrad;

namespace {

constexpr std::size_t kSampleTokens = 300;
const SampleOptions kSampling{.temperature = 0.8, .top_k = 200};  // nanoGPT's sample.py

class LanguageWorkload : public Workload {
 public:
  LanguageWorkload(const Config& c, std::shared_ptr<const LanguageData> data, const Metadata* checkpoint)
      : config_(c),
        data_(std::move(data)),
        model_config_(language_model_config(c, data_->vocabulary_size(), checkpoint)),
        model_ptr_(make_language_model(c, data_->vocabulary_size(), checkpoint)),
        model_(*model_ptr_) {}

  nn::Module& model() override { return model_; }

  std::string sizes() const override {
    if (!model_config_) return flag_sizes(config_);
    if (const auto* gpt2 = std::get_if<models::GPT2Config>(&*model_config_))
      return model_sizes(gpt2->n_layer, gpt2->n_embd, gpt2->n_head);
    const auto& llama = std::get<models::LlamaConfig>(*model_config_);
    std::string words = model_sizes(llama.num_hidden_layers, llama.hidden_size, llama.num_attention_heads);
    if (llama.attention_width() != llama.hidden_size) words += str(" ", llama.head_width(), " wide");
    if (llama.kv_heads() != llama.num_attention_heads) words += str(" (", llama.kv_heads(), " for keys and values)");
    if (llama.sliding_window) words += str(", window ", llama.sliding_window);
    return words;
  }

  Tensor training_loss(std::int64_t step, std::size_t micro, std::size_t micro_batches) override {
    const Batch batch =
        data_->training_batch(config_.seed, step, static_cast<std::size_t>(config_.batch), micro, micro_batches);
    return cross_entropy(model_.forward(batch.inputs), batch.targets);
  }

  // The validation loss also per byte of text: comparable across tokenizers.
  std::optional<Evaluation> evaluate(std::int64_t step, double recent_train_loss,
                                     const std::function<bool()>& interrupted) override {
    (void)step, (void)recent_train_loss;  // the same windows every time
    const std::optional<double> train_loss = mean_loss(Split::train, interrupted);
    const std::optional<double> val_loss = train_loss ? mean_loss(Split::validation, interrupted) : std::nullopt;
    if (!val_loss) return std::nullopt;
    const Evaluation e{*train_loss, *val_loss, std::nullopt, std::nullopt,
                       *val_loss * static_cast<double>(evaluation(Split::validation).tokens) /
                           static_cast<double>(evaluation(Split::validation).bytes) / std::log(2.0)};
    return e;
  }

  void print_samples(std::ostream& os, std::int64_t step) override {
    Generator gen = stream_generator(config_.seed, 4, static_cast<std::uint64_t>(step));
    const std::vector<std::int64_t> prompt = {data_->prompt_token()};
    SampleOptions sampling = kSampling;
    sampling.vocabulary = data_->vocabulary_size();  // not the ids past it a model's config may have
    std::vector<std::int64_t> text;
    try {
      text = generate(model_, prompt, kSampleTokens, sampling, gen);
    } catch (const Error& e) {  // a run let go on past non-finite weights (--allow-nonfinite)
      os << "sample: none (" << e.what() << ")\n";
      return;
    }
    os << "sample (" << kSampleTokens << " " << data_->unit() << ", temperature " << kSampling.temperature << "):\n"
       << data_->decode(text) << "\n";
  }

  // The attention maps are too big to read in a terminal: drawn only.
  void show_attention(std::ostream& os, const std::string& png) override {
    if (png.empty()) return;
    NoGradGuard no_grad;
    model_.eval();
    const Batch first = data_->evaluation_batches(Split::validation, config_.seed, 1, 1).front();
    auto* gpt = dynamic_cast<GPT*>(&model_);
    if (!gpt) {
      os << flag(&Config::attention_png) << ": only " << flag(&Config::model) << " gpt keeps its attention maps\n";
      return;
    }
    GPTBlock& last = gpt->block(gpt->options.layers - 1);
    last.keep_attention = true;
    model_.forward(first.inputs);
    const Tensor maps = squeeze(last.last_attention, 0);  // [H, T, T]
    last.keep_attention = false;
    last.last_attention = Tensor();
    model_.train();
    std::vector<std::string> labels;
    for (const std::int64_t t : first.inputs.values) labels.push_back(data_->label(t));
    write_attention_png(png, flag(&Config::attention_png), maps, labels,
                        str("xgrad-train ", flag(&Config::task), " lm: attention of the last layer on validation text"),
                        "_ is a space, $ a line break, ? another byte");
    os << "wrote the attention maps to " << png << "\n";
  }

  void export_model(std::ostream& os) override {
    if (config_.save_hf.empty()) return;
    const auto& published = dynamic_cast<const models::PretrainedModel&>(model_);
    try {
      if (config_.lora > 0)  // the adapters alone, as PEFT saves them
        nn::save_adapter(config_.save_hf, published, lora_config(config_));
      else
        models::save_pretrained(published, config_.save_hf,
                                {.tokenizer = data_->tokenizer(), .text_bytes = data_->byte_alphabet()});
    } catch (const Error& e) {
      throw UsageError(str(flag(&Config::save_hf), ": ", e.what()));
    }
    if (!config_.quiet)
      os << "wrote the " << (config_.lora > 0 ? "LoRA adapters in PEFT's layout" : "model as a Hugging Face directory")
         << " to " << config_.save_hf << "\n";
  }

  void add_metadata(Metadata& metadata) const override {
    data_->add_metadata(metadata);
    // As config.json would hold it: the tokenizer's bos and eos ids, the text's bytes
    // (a resumed run's --save-hf has nothing else to take them from).
    if (model_config_)
      metadata[kModelConfigKey] = models::model_config_json(
          *model_config_, {.tokenizer = data_->tokenizer(), .text_bytes = data_->byte_alphabet()});
  }

 private:
  // A split's evaluation batches, made once: the same windows at every evaluation.
  struct Windows {
    std::vector<Batch> batches;
    std::uint64_t tokens = 0, bytes = 0;  // the targets', over all batches
  };
  const Windows& evaluation(Split split) {
    std::optional<Windows>& windows = split == Split::train ? train_windows_ : validation_windows_;
    if (!windows) {
      windows.emplace();
      windows->batches = data_->evaluation_batches(split, config_.seed, static_cast<std::size_t>(config_.eval_batches),
                                                   static_cast<std::size_t>(config_.batch));
      for (const Batch& batch : windows->batches) {
        windows->tokens += batch.targets.values.size();
        windows->bytes += data_->text_bytes(batch.targets);
      }
    }
    return *windows;
  }

  // The mean loss over the split's evaluation batches.
  std::optional<double> mean_loss(Split split, const std::function<bool()>& interrupted) {
    NoGradGuard no_grad;
    model_.eval();
    double sum = 0;
    for (const Batch& batch : evaluation(split).batches) {
      if (interrupted()) {
        model_.train();
        return std::nullopt;
      }
      sum += cross_entropy(model_.forward(batch.inputs), batch.targets).item();
    }
    model_.train();
    return sum / config_.eval_batches;
  }

  Config config_;
  std::shared_ptr<const LanguageData> data_;
  std::optional<models::ModelConfig> model_config_;  // a published model's (gpt2, llama)
  std::unique_ptr<models::CausalLM> model_ptr_;
  models::CausalLM& model_;
  std::optional<Windows> train_windows_, validation_windows_;
};

}  // namespace

std::unique_ptr<Workload> make_language_workload(const Config& config, std::shared_ptr<const LanguageData> data,
                                                 const Metadata* checkpoint) {
  return std::make_unique<LanguageWorkload>(config, std::move(data), checkpoint);
}

}  // namespace tools
