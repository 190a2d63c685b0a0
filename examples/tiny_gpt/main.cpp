// tiny_gpt: a character-level GPT trained on a text file in plain xgrad calls, as nanoGPT
// and llm.c write one: the transformer block and the whole loop are on the page (batch,
// forward, cross-entropy, zero_grad, backward, clip, step). It learns the text's bytes,
// reports the validation loss against the uniform guess log(vocab), then writes a sample.
//   usage: tiny_gpt TEXT [STEPS]     (STEPS: 2000 by default)
// The run is a function of the text and STEPS: every random draw comes from a seeded
// xgrad::Generator, and xgrad's results do not depend on the number of threads.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>
#include <xgrad/xgrad.hpp>  // the whole public API

using namespace xgrad;

constexpr std::size_t kBlock = 64;   // context length (tokens the model sees at once)
constexpr std::size_t kBatch = 16;   // windows per step
constexpr std::size_t kDModel = 64;  // width of the residual stream
constexpr std::size_t kHeads = 4, kLayers = 2;

// Causal self-attention: q, k and v from one projection [N, T, 3C], read in place as its
// column ranges by the fused op (head h in the h-th C / kHeads columns of each), then back to C.
struct CausalSelfAttention : nn::Module {
  std::shared_ptr<nn::Linear> c_attn = register_module("c_attn", std::make_shared<nn::Linear>(kDModel, 3 * kDModel));
  std::shared_ptr<nn::Linear> c_proj = register_module("c_proj", std::make_shared<nn::Linear>(kDModel, kDModel));
  Tensor forward(const Tensor& x) override {
    const Tensor qkv = c_attn->forward(x);
    AttentionOptions causal;
    causal.is_causal = true;  // position t sees 0..t
    const AttentionOutput heads = multi_head_attention(
        {qkv, 0, kDModel}, {qkv, kDModel, kDModel}, {qkv, 2 * kDModel, kDModel}, kHeads, /*batch_first=*/true, causal);
    return c_proj->forward(heads.output);
  }
};

struct MLP : nn::Module {  // C to 4C, exact GELU, back to C
  std::shared_ptr<nn::Linear> c_fc = register_module("c_fc", std::make_shared<nn::Linear>(kDModel, 4 * kDModel));
  std::shared_ptr<nn::Linear> c_proj = register_module("c_proj", std::make_shared<nn::Linear>(4 * kDModel, kDModel));
  Tensor forward(const Tensor& x) override { return c_proj->forward(gelu(c_fc->forward(x))); }
};

// One transformer block, pre-LN as in GPT-2: each half reads a normalized copy of the
// residual stream x and adds its result back to it.
struct Block : nn::Module {
  std::shared_ptr<nn::LayerNorm> ln_1 = register_module("ln_1", std::make_shared<nn::LayerNorm>(kDModel));
  std::shared_ptr<CausalSelfAttention> attn = register_module("attn", std::make_shared<CausalSelfAttention>());
  std::shared_ptr<nn::LayerNorm> ln_2 = register_module("ln_2", std::make_shared<nn::LayerNorm>(kDModel));
  std::shared_ptr<MLP> mlp = register_module("mlp", std::make_shared<MLP>());

  Tensor forward(const Tensor& input) override {
    Tensor x = input;
    x = x + attn->forward(ln_1->forward(x));
    x = x + mlp->forward(ln_2->forward(x));
    return x;
  }
};

// The GPT: token and position embeddings, kLayers blocks, a final LayerNorm, a head to one logit per byte.
struct TinyGPT : nn::Module {
  std::shared_ptr<nn::Embedding> wte, wpe;
  std::shared_ptr<nn::Sequential> h;
  std::shared_ptr<nn::LayerNorm> ln_f;
  std::shared_ptr<nn::Linear> head;

  explicit TinyGPT(std::size_t vocab) {
    wte = register_module("wte", std::make_shared<nn::Embedding>(vocab, kDModel));
    wpe = register_module("wpe", std::make_shared<nn::Embedding>(kBlock, kDModel));
    h = register_module("h", std::make_shared<nn::Sequential>());
    for (std::size_t i = 0; i < kLayers; ++i) h->push_back(std::make_shared<Block>());
    ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(kDModel));
    head = register_module("head", std::make_shared<nn::Linear>(kDModel, vocab));
    // GPT-2's init for the embeddings (small, so that the blocks' outputs are heard).
    for (const auto& table : {wte, wpe}) nn::init::normal_(table->weight, 0.0, 0.02);
  }

  Tensor forward(const Indices& ids) {  // ids [N, T], T <= kBlock -> logits [N, T, vocab]
    const std::size_t T = ids.shape[1];
    std::vector<std::int64_t> where(T);
    std::iota(where.begin(), where.end(), 0);
    const Tensor x = wte->forward(ids) + wpe->forward(Indices(where, {T}));  // [N, T, C] + [T, C]
    return head->forward(ln_f->forward(h->forward(x)));
  }
};

// kBatch random windows of the split [begin, end): inputs and the same shifted by one.
std::pair<Indices, Indices> batch(const std::vector<std::int64_t>& data, std::size_t begin, std::size_t end,
                                  Generator& gen) {
  std::vector<std::int64_t> inputs, targets;
  for (std::size_t b = 0; b < kBatch; ++b) {
    const std::size_t at = begin + gen.below(end - begin - kBlock);
    inputs.insert(inputs.end(), data.begin() + at, data.begin() + at + kBlock);
    targets.insert(targets.end(), data.begin() + at + 1, data.begin() + at + kBlock + 1);
  }
  return {Indices(inputs, {kBatch, kBlock}), Indices(targets, {kBatch, kBlock})};
}

int main(int argc, char** argv) {
  char* end = nullptr;
  const long steps = argc == 3 ? std::strtol(argv[2], &end, 10) : 2000;  // 2000: about 20 s on one core
  if (argc < 2 || argc > 3 || (argc == 3 && (end == argv[2] || *end != '\0')) || steps < 1 || steps > 1000000) {
    std::fprintf(stderr, "usage: tiny_gpt TEXT [STEPS]   (STEPS: a whole number from 1 to 1000000)\n");
    return 2;
  }

  // 1. The text, its vocabulary (the distinct bytes, sorted) and the 90/10 split.
  std::ifstream file(argv[1], std::ios::binary);
  std::ostringstream contents;
  const bool read = file && (contents << file.rdbuf());  // false for a directory or an empty file
  if (!read) {
    std::fprintf(stderr, "tiny_gpt: %s: cannot read it (no such file, a folder, or empty)\n", argv[1]);
    return 2;
  }
  if (contents.str().size() < 20 * (kBlock + 1)) {
    std::fprintf(stderr, "tiny_gpt: %s: too short (a text needs %zu bytes at least)\n", argv[1], 20 * (kBlock + 1));
    return 2;
  }
  const std::string text = contents.str();
  std::vector<unsigned char> vocabulary(text.begin(), text.end());
  std::sort(vocabulary.begin(), vocabulary.end());
  vocabulary.erase(std::unique(vocabulary.begin(), vocabulary.end()), vocabulary.end());
  std::int64_t token_of[256] = {};
  for (std::size_t i = 0; i < vocabulary.size(); ++i) token_of[vocabulary[i]] = static_cast<std::int64_t>(i);
  std::vector<std::int64_t> data;
  for (const unsigned char c : text) data.push_back(token_of[c]);
  const std::size_t split = data.size() * 9 / 10;  // train [0, split), validation [split, end)
  const std::size_t vocab = vocabulary.size();

  // 2. The model and the optimizer: AdamW, weight decay on the matrices only (not on
  //    biases and LayerNorm), a short warmup then a cosine decay of the rate.
  manual_seed(0);  // parameter initialization draws from the default generator
  TinyGPT model(vocab);
  optim::ParamGroup decayed{{}, {{"weight_decay", 0.1}}}, not_decayed{{}, {{"weight_decay", 0.0}}};
  for (const auto& named : model.named_parameters())
    (named.second.dim() >= 2 ? decayed : not_decayed).parameters.push_back(named);
  optim::AdamW optimizer({decayed, not_decayed}, {.lr = 3e-3, .beta2 = 0.99});
  optim::WarmupCosineLR schedule(optimizer, std::max(1L, steps / 20), steps, 3e-4);
  std::printf("tiny_gpt: %s, %zu bytes, vocab %zu (uniform loss log(vocab) = %.4f), %zu parameters, %ld steps\n",
              argv[1], text.size(), vocab, std::log(static_cast<double>(vocab)), model.num_parameters(), steps);

  // 3. Training: a fresh random batch every step.
  Generator data_gen(1);
  const auto start = std::chrono::steady_clock::now();
  double recent = 0;  // mean train loss since the last report
  const long every = std::max(1L, steps / 10);
  for (long step = 1; step <= steps; ++step) {
    const auto [inputs, targets] = batch(data, 0, split, data_gen);
    const Tensor logits = model.forward(inputs);         // [kBatch, kBlock, vocab]
    const Tensor loss = cross_entropy(logits, targets);  // mean over every position
    optimizer.zero_grad();
    loss.backward();
    // Gradient norm clipped to 1, as clip_grad_norm then step() would, with the scaling
    // done by the update as it reads each gradient.
    optimizer.step(optim::grad_norm_clip(model.parameters(), 1.0).factor);
    schedule.step();
    recent += loss.item();
    if (step % every == 0 || step == steps) {
      const long since = step % every == 0 ? every : step % every;
      std::printf("step %ld/%ld  train loss %.4f  lr %.2e\n", step, steps, recent / static_cast<double>(since),
                  optimizer.lr());
      std::fflush(stdout);
      recent = 0;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // 4. Validation: the mean loss over 20 batches of held-out text (the same every run).
  NoGradGuard no_grad;  // from here on, no graph is recorded
  model.eval();
  Generator val_gen(2);
  double val_loss = 0;
  for (int i = 0; i < 20; ++i) {
    const auto [inputs, targets] = batch(data, split, data.size(), val_gen);
    val_loss += cross_entropy(model.forward(inputs), targets).item() / 20;
  }
  std::printf("validation loss %.4f (uniform %.4f) after %ld steps in %.1f s\n", val_loss,
              std::log(static_cast<double>(vocab)), steps, seconds);

  // 5. A sample: 200 bytes, each drawn from softmax(logits / 0.8) at the last position
  //    given (at most) the last kBlock bytes, starting from the validation text's first.
  Generator sampler(3);
  std::vector<std::int64_t> context = {data[split]};
  for (int n = 0; n < 200; ++n) {
    const std::size_t from = context.size() > kBlock ? context.size() - kBlock : 0, T = context.size() - from;
    const Indices window(std::vector<std::int64_t>(context.begin() + from, context.end()), {1, T});
    const Tensor last = slice(model.forward(window), 1, T - 1, T);  // [1, 1, vocab]
    const std::vector<double> p = softmax(last / 0.8).to_vector();
    double u = sampler.uniform();
    std::size_t next = 0;
    while (next + 1 < vocab && (u -= p[next]) >= 0) ++next;
    context.push_back(static_cast<std::int64_t>(next));
  }
  std::string sample;
  for (const std::int64_t t : context) sample += static_cast<char>(vocabulary[static_cast<std::size_t>(t)]);
  std::printf("sample:\n%s\n", sample.c_str());
  return 0;
}
