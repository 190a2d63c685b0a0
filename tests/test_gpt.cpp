#define BOOST_TEST_MODULE gpt
// The lm task's GPT (examples/train/gpt.hpp): gradients, the tied head, causality, init.
#include "helpers.hpp"

#include <cmath>

#include "gpt.hpp"
#include "xgrad/nn/gradcheck.hpp"

using namespace xgrad;
using namespace xgrad::test;
using train::GPT;

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
  const auto groups = train::decay_groups(model, 0.1);
  BOOST_REQUIRE_EQUAL(groups.size(), 2u);
  BOOST_CHECK_EQUAL(groups[0].weight_decay.value(), 0.1);
  BOOST_CHECK_EQUAL(groups[1].weight_decay.value(), 0.0);
  BOOST_CHECK_EQUAL(groups[0].parameters.size(), 2u + 4u * 4u);  // wte, wpe, 4 Linear weights per block
  for (const auto& [name, p] : groups[1].parameters) BOOST_CHECK_EQUAL(p.dim(), 1u);
}

BOOST_AUTO_TEST_CASE(generation_greedy_seeded_top_k_and_a_sliding_window) {
  manual_seed(4);
  GPT model({.vocab = 6, .block = 5, .layers = 1, .heads = 2, .d_model = 8});
  const std::vector<std::int64_t> prompt = {1, 2};
  // Greedy: each token is the argmax of the model's last row, as computed here by hand.
  Generator unused(0);
  const std::vector<std::int64_t> greedy = train::generate(model, prompt, 12, {.temperature = 0.0}, unused);
  BOOST_REQUIRE_EQUAL(greedy.size(), 14u);
  for (std::size_t n = 2; n < greedy.size(); ++n) {
    const std::size_t T = std::min<std::size_t>(5, n);
    const std::vector<std::int64_t> window(greedy.begin() + static_cast<std::ptrdiff_t>(n - T),
                                           greedy.begin() + static_cast<std::ptrdiff_t>(n));
    NoGradGuard no_grad;
    const std::vector<double> logits = model.forward(Indices(window, {1, T})).to_vector();
    const auto last = logits.end() - 6;
    BOOST_CHECK_EQUAL(greedy[n], std::max_element(last, logits.end()) - last);
  }
  // Sampling is a function of the generator; top_k = 1 is greedy.
  Generator a(7), b(7), c(7);
  const auto first = train::generate(model, prompt, 20, {}, a);
  BOOST_CHECK(first == train::generate(model, prompt, 20, {}, b));
  BOOST_CHECK(train::generate(model, prompt, 12, {.temperature = 1.0, .top_k = 1}, c) == greedy);
  for (const std::int64_t t : first) BOOST_CHECK(t >= 0 && t < 6);
  BOOST_CHECK(model.is_training());  // restored
  check_error([&] { train::generate(model, {}, 3, {}, a); }, {"generate", "context"});
  check_error([&] { train::generate(model, prompt, 3, {.temperature = -1.0}, a); }, {"generate", "temperature"});
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
  for (int i = 0; i < draws; ++i) counts[static_cast<std::size_t>(train::generate(model, {0}, 1, {}, gen)[1])] += 1;
  for (std::size_t v = 0; v < 4; ++v) BOOST_CHECK_SMALL(counts[v] / draws - p[v], 0.02);
}
