#define BOOST_TEST_MODULE gpt
// The lm task's GPT (tools/common/gpt.hpp): gradients, the tied head, causality, init.
#include "helpers.hpp"

#include <cmath>

#include "gpt.hpp"
#include "xgrad/nn/gradcheck.hpp"

using namespace xgrad;
using namespace xgrad::test;
using tools::GPT;

namespace {

double std_of(const Tensor& t) {
  const std::vector<double> v = t.to_vector();
  double sum = 0, squares = 0;
  for (double x : v) sum += x, squares += x * x;
  const double mean = sum / static_cast<double>(v.size());
  return std::sqrt(squares / static_cast<double>(v.size()) - mean * mean);
}

}  // namespace

BOOST_AUTO_TEST_CASE(gradients_of_every_parameter_in_float64) {
  manual_seed(3);
  GPT model({.vocab = 5, .block = 6, .layers = 2, .heads = 2, .d_model = 8});
  const Indices tokens({0, 4, 2, 2, 1, 3, 4, 0, 1, 1}, {2, 5});
  const Indices targets({4, 2, 2, 1, 3, 0, 1, 1, 2, 0}, {2, 5});
  check_module_gradients(model,
                         [&](const std::vector<Tensor>&) { return cross_entropy(model.forward(tokens), targets); }, {});
}

BOOST_AUTO_TEST_CASE(the_head_is_the_token_embedding) {
  manual_seed(1);
  GPT model({.vocab = 7, .block = 4, .layers = 1, .heads = 2, .d_model = 8});
  for (const auto& [name, p] : model.named_parameters()) BOOST_CHECK(name.find("head") == std::string::npos);
  BOOST_CHECK_EQUAL(model.named_parameters().size(), 2u + 12u + 2u);  // wte, wpe; one block; ln_f
  // The logits are ln_f(x) @ wte^T: changing wte changes them even for unused tokens.
  const Indices tokens({1, 2}, {1, 2});
  const std::vector<double> before = model.forward(tokens).to_vector();
  model.wte->weight.data<float>()[6 * 8] += 1.0f;  // token 6, never an input here
  const std::vector<double> after = model.forward(tokens).to_vector();
  for (std::size_t t = 0; t < 2; ++t) {
    BOOST_CHECK_NE(after[t * 7 + 6], before[t * 7 + 6]);  // its logit moved
    BOOST_CHECK_EQUAL(after[t * 7 + 0], before[t * 7 + 0]);
  }
}

BOOST_AUTO_TEST_CASE(a_position_never_sees_the_future) {
  manual_seed(2);
  GPT model({.vocab = 6, .block = 8, .layers = 2, .heads = 2, .d_model = 16});
  std::vector<std::int64_t> ids = {0, 1, 2, 3, 4, 5, 0, 1};
  const std::vector<double> a = model.forward(Indices(ids, {1, 8})).to_vector();
  ids[5] = 2;  // change position 5
  const std::vector<double> b = model.forward(Indices(ids, {1, 8})).to_vector();
  for (std::size_t t = 0; t < 8; ++t) {
    bool same = true;
    for (std::size_t v = 0; v < 6; ++v) same = same && a[t * 6 + v] == b[t * 6 + v];
    BOOST_CHECK_MESSAGE(same == (t < 5), "position " << t);
  }
  check_error([&] { model.forward(Indices(std::vector<std::int64_t>(9, 0), {1, 9})); }, {"GPT", "block 8"});
}

BOOST_AUTO_TEST_CASE(init_and_weight_decay_groups_follow_nanogpt) {
  manual_seed(0);
  GPT model({.vocab = 65, .block = 64, .layers = 4, .heads = 4, .d_model = 128});
  const double residual = 0.02 / std::sqrt(8.0);
  for (const auto& [name, p] : model.named_parameters()) {
    BOOST_TEST_CONTEXT(name) {
      if (name.ends_with("c_proj.weight") || name.ends_with("mlp_proj.weight"))
        BOOST_CHECK_CLOSE(std_of(p), residual, 5.0);
      else if (p.dim() == 2)
        BOOST_CHECK_CLOSE(std_of(p), 0.02, 5.0);
      else  // LayerNorm weights 1, every bias 0
        for (double v : p.to_vector()) BOOST_CHECK_EQUAL(v, name.ends_with("weight") ? 1.0 : 0.0);
    }
  }
  const auto groups = tools::decay_groups(model, 0.1);
  BOOST_REQUIRE_EQUAL(groups.size(), 2u);
  BOOST_CHECK((groups[0].settings == optim::SettingValues{{"weight_decay", 0.1}}));
  BOOST_CHECK((groups[1].settings == optim::SettingValues{{"weight_decay", 0.0}}));
  BOOST_CHECK_EQUAL(groups[0].parameters.size(), 2u + 4u * 4u);  // wte, wpe, 4 Linear weights per block
  for (const auto& [name, p] : groups[1].parameters) BOOST_CHECK_EQUAL(p.dim(), 1u);
}

BOOST_AUTO_TEST_CASE(generation_greedy_seeded_top_k_and_a_sliding_window) {
  manual_seed(4);
  GPT model({.vocab = 6, .block = 5, .layers = 1, .heads = 2, .d_model = 8});
  const std::vector<std::int64_t> prompt = {1, 2};
  // Greedy: each token is the argmax of the model's last row, as computed here by hand.
  Generator unused(0);
  const std::vector<std::int64_t> greedy = tools::generate(model, prompt, 12, {.temperature = 0.0}, unused);
  BOOST_REQUIRE_EQUAL(greedy.size(), 14u);
  for (std::size_t n = 2; n < greedy.size(); ++n) {
    const std::size_t T = n - tools::window_start(n, 5);
    const std::vector<std::int64_t> window(greedy.begin() + static_cast<std::ptrdiff_t>(n - T),
                                           greedy.begin() + static_cast<std::ptrdiff_t>(n));
    NoGradGuard no_grad;
    const std::vector<double> logits = model.forward(Indices(window, {1, T})).to_vector();
    const auto last = logits.end() - 6;
    BOOST_CHECK_EQUAL(greedy[n], std::max_element(last, logits.end()) - last);
  }
  // Sampling is a function of the generator; top_k = 1 is greedy.
  Generator a(7), b(7), c(7);
  const auto first = tools::generate(model, prompt, 20, {}, a);
  BOOST_CHECK(first == tools::generate(model, prompt, 20, {}, b));
  BOOST_CHECK(tools::generate(model, prompt, 12, {.temperature = 1.0, .top_k = 1}, c) == greedy);
  for (const std::int64_t t : first) BOOST_CHECK(t >= 0 && t < 6);
  BOOST_CHECK(model.is_training());  // restored
  check_error([&] { tools::generate(model, {}, 3, {}, a); }, {"generate", "context"});
  check_error([&] { tools::generate(model, prompt, 3, {.temperature = -1.0}, a); }, {"generate", "temperature"});
  check_error([&] { tools::generate(model, {1, 6}, 3, {}, a); }, {"generate", "token 6", "vocabulary of 6"});
}

BOOST_AUTO_TEST_CASE(the_window_slides_by_half_a_block) {
  // Every context up to the block is seen whole; beyond it the window starts at a
  // multiple of block / 2 and holds more than half a block and at most a block.
  BOOST_CHECK_EQUAL(tools::window_start(1, 8), 0u);
  BOOST_CHECK_EQUAL(tools::window_start(8, 8), 0u);
  BOOST_CHECK_EQUAL(tools::window_start(9, 8), 4u);
  BOOST_CHECK_EQUAL(tools::window_start(12, 8), 4u);
  BOOST_CHECK_EQUAL(tools::window_start(13, 8), 8u);
  BOOST_CHECK_EQUAL(tools::window_start(2, 1), 1u);  // a block of one: the last token only
  for (std::size_t block : {1u, 2u, 5u, 8u, 64u})
    for (std::size_t n = 1; n < 5 * block; ++n) {
      const std::size_t start = tools::window_start(n, block), jump = std::max<std::size_t>(1, block / 2);
      BOOST_CHECK_LE(n - start, block);
      BOOST_CHECK(n <= block ? start == 0 : start % jump == 0 && n - start > block - jump);
    }
}

BOOST_AUTO_TEST_CASE(cached_keys_and_values_give_the_full_forward_logits) {
  // Feeding a sequence in pieces through the cache (a prompt, single tokens, a chunk)
  // gives every position the logits of one whole forward, in float64 to rounding.
  manual_seed(6);
  GPT model({.vocab = 7, .block = 12, .layers = 2, .heads = 2, .d_model = 8});
  model.to(DType::float64);
  model.eval();
  NoGradGuard no_grad;
  const std::vector<std::int64_t> ids = {3, 1, 4, 1, 5, 2, 6, 5, 3, 5, 0};
  const std::vector<double> whole = model.forward(Indices(ids, {1, ids.size()})).to_vector();
  models::KVCache cache;
  std::vector<double> pieces;
  for (const auto& [begin, end] :
       std::vector<std::pair<std::size_t, std::size_t>>{{0, 4}, {4, 5}, {5, 6}, {6, 9}, {9, 11}}) {
    const std::vector<std::int64_t> piece(ids.begin() + static_cast<std::ptrdiff_t>(begin),
                                          ids.begin() + static_cast<std::ptrdiff_t>(end));
    const std::vector<double> logits = model.forward(Indices(piece, {1, piece.size()}), &cache).to_vector();
    pieces.insert(pieces.end(), logits.begin(), logits.end());
    BOOST_CHECK_EQUAL(cache.length, end);
  }
  check_close(pieces, whole, 1e-12);
  // The cache holds at most a block.
  check_error([&] { model.forward(Indices({1, 2}, {1, 2}), &cache); }, {"GPT", "block 12", "cached positions 11"});
  // A block keeping its attention map sees the whole sequence: a cache is refused, and
  // left as it was, rather than passed over.
  models::KVCache fresh;
  model.block(1).keep_attention = true;
  check_error([&] { model.forward(Indices({1, 2}, {1, 2}), &fresh); }, {"GPT", "block 1", "attention map", "cache"});
  BOOST_CHECK_EQUAL(fresh.length, 0u);
  BOOST_CHECK(fresh.layers.empty());
  models::KVCache::Layer layer;
  check_error(
      [&] {
        model.block(1).forward(Tensor::zeros({1, 2, 8}, DType::float64), &layer);
      },
      {"GPTBlock", "keep_attention", "cache"});
}

BOOST_AUTO_TEST_CASE(generation_with_the_cache_writes_the_same_text_as_without) {
  // Over contexts that slide several times, every temperature and top-k, and both
  // dtypes: the cache changes the speed, not the text.
  manual_seed(8);
  GPT model({.vocab = 9, .block = 8, .layers = 2, .heads = 2, .d_model = 16});
  for (const DType dtype : {DType::float32, DType::float64}) {
    model.to(dtype);
    for (const tools::SampleOptions base :
         {tools::SampleOptions{.temperature = 0.0}, tools::SampleOptions{.temperature = 1.0},
          tools::SampleOptions{.temperature = 1.5, .top_k = 3}})
      for (std::uint64_t seed = 0; seed < 4; ++seed) {
        tools::SampleOptions cached = base, uncached = base;
        uncached.use_cache = false;
        Generator a(seed), b(seed);
        std::vector<std::int64_t> streamed;
        const auto with_cache =
            tools::generate(model, {1, 2, 3}, 40, cached, a, [&](std::int64_t t) { streamed.push_back(t); });
        BOOST_CHECK(with_cache == tools::generate(model, {1, 2, 3}, 40, uncached, b));
        BOOST_CHECK(std::vector<std::int64_t>(with_cache.begin() + 3, with_cache.end()) == streamed);
      }
  }
}

BOOST_AUTO_TEST_CASE(sampling_follows_the_model_distribution) {
  // With one token of context the distribution of the next token is softmax(logits):
  // 20,000 draws at temperature 1 land within 2% of it.
  manual_seed(5);
  GPT model({.vocab = 4, .block = 2, .layers = 1, .heads = 1, .d_model = 8});
  model.wte->weight.data<float>()[0] = 3.0f;  // make the distribution uneven
  std::vector<double> p;
  {
    NoGradGuard no_grad;
    p = softmax(model.forward(Indices({0}, {1, 1})), -1).to_vector();
  }
  std::vector<double> counts(4, 0.0);
  Generator gen(11);
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) counts[static_cast<std::size_t>(tools::generate(model, {0}, 1, {}, gen)[1])] += 1;
  for (std::size_t v = 0; v < 4; ++v) BOOST_CHECK_SMALL(counts[v] / draws - p[v], 0.02);
}
