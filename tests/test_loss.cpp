#define BOOST_TEST_MODULE loss
#include "helpers.hpp"

using namespace xgrad;
using namespace xgrad::test;

using Inputs = std::vector<Tensor>;

BOOST_AUTO_TEST_CASE(embedding_gathers_rows) {
  const Tensor w = Tensor::from_vector({0, 1, 10, 11, 20, 21}, {3, 2}, DType::float64);
  const Indices ids({2, 0, 2, 1}, {2, 2});
  const Tensor e = embedding(w, ids);
  BOOST_CHECK(e.shape() == (Shape{2, 2, 2}));
  check_close(e.to_vector(), {20, 21, 0, 1, 20, 21, 10, 11});
  // Repeated ids scatter-add into the same row.
  check_gradients([ids](const Inputs& in) { return embedding(in[0], ids); }, {randn64({3, 2}, 1)});
  check_error([&] { embedding(w, Indices({0, 3}, {2})); }, {"embedding", "id 3", "[3, 2]"});
  check_error([&] { embedding(w, Indices({-1}, {1})); }, {"embedding", "id -1"});
  check_error([&] { embedding(randn64({3}, 2), ids); }, {"embedding", "2-D", "[3]"});
}

BOOST_AUTO_TEST_CASE(cross_entropy_value) {
  const Tensor logits = Tensor::from_vector({1, 2, 3, 1, 1, 1}, {2, 3}, DType::float64);
  const Indices targets({2, 0}, {2});
  const double lse0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  const double expected = ((lse0 - 3.0) + std::log(3.0)) / 2.0;
  BOOST_CHECK_CLOSE(cross_entropy(logits, targets).item(), expected, 1e-12);
}

BOOST_AUTO_TEST_CASE(cross_entropy_gradients_with_ignore_index) {
  const Tensor logits = randn64({2, 3, 5}, 3);
  const Indices targets({4, 0, -100, 2, -100, 1}, {2, 3});
  check_gradients([targets](const Inputs& in) { return cross_entropy(in[0], targets); }, {logits});
  // Ignored positions neither count in the mean nor get gradient.
  const Indices only_first({4, -100, -100, -100, -100, -100}, {2, 3});
  const Tensor first_row = slice(reshape(logits, {6, 5}), 0, 0, 1);
  BOOST_CHECK_CLOSE(cross_entropy(logits, only_first).item(), cross_entropy(first_row, Indices({4}, {1})).item(),
                    1e-10);
  Tensor x = logits.detach().requires_grad_();
  cross_entropy(x, only_first).backward();
  const auto g = x.grad().to_vector();
  for (std::size_t i = 5; i < g.size(); ++i) BOOST_CHECK_EQUAL(g[i], 0.0);
  // A custom ignore value.
  const Indices custom({4, 0, 7, 2, 7, 1}, {2, 3});
  check_gradients([custom](const Inputs& in) { return cross_entropy(in[0], custom, 7); }, {logits});
}

BOOST_AUTO_TEST_CASE(cross_entropy_all_ignored_is_zero) {
  Tensor x = randn64({2, 3}, 4);
  Tensor loss = cross_entropy(x, Indices({-100, -100}, {2}));
  BOOST_CHECK_EQUAL(loss.item(), 0.0);
  loss.backward();
  check_close(x.grad().to_vector(), std::vector<double>(6, 0.0));
}

BOOST_AUTO_TEST_CASE(cross_entropy_large_logits_stay_finite) {
  const Tensor logits = Tensor::from_vector({1e4, -1e4, 0, 0}, {1, 4}, DType::float32);
  BOOST_CHECK_SMALL(cross_entropy(logits, Indices({0}, {1})).item(), 1e-6);
  BOOST_CHECK_CLOSE(cross_entropy(logits, Indices({1}, {1})).item(), 2e4, 1e-4);
}

BOOST_AUTO_TEST_CASE(cross_entropy_errors) {
  const Tensor logits = randn64({2, 3}, 5);
  check_error([&] { cross_entropy(logits, Indices({0, 3}, {2})); }, {"cross_entropy", "target 3", "[2, 3]"});
  check_error([&] { cross_entropy(logits, Indices({0, 1, 2}, {3})); }, {"cross_entropy", "[3]", "[2, 3]"});
}
