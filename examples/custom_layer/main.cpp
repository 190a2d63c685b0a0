// The custom layer end to end: Snake (snake.hpp), a periodic activation xgrad does not
// ship. Check the op's values and its gradient in float64, alpha = 0 included; check the
// layer (its alpha too); see a bad input refused; then train a small classifier that
// uses it on a periodic pattern. Exit 1 if any of it fails.

#include <cmath>
#include <cstdio>
#include <iostream>
#include <numbers>
#include <string>
#include <xgrad/xgrad.hpp>  // the whole public API

#include "snake.hpp"

using namespace xgrad;

int failed(const char* what) {
  std::fprintf(stderr, "custom_layer: %s\n", what);
  return 1;
}

int main() {
  // 1. The op's values, to rounding: the paper's formula written with library ops where
  //    alpha != 0, the limit x + alpha x^2 for a tiny alpha, and exactly x at alpha = 0.
  Generator gen(0);
  Tensor x = Tensor::randn({4, 6}, gen, DType::float64).requires_grad_();
  const Tensor alpha = Tensor::from_vector({-0.7, 0.3, 0.5, 1.0, 2.0, 3.0}, {6}, DType::float64);
  const Tensor tiny = Tensor::full({6}, 1e-7, DType::float64), zero = Tensor::zeros({6}, DType::float64);
  const auto within = [](const Tensor& a, const Tensor& b, double tolerance) {
    return max(abs(a - b)).item() <= tolerance;  // false for a NaN
  };
  if (!within(snake(x, alpha), x + sin(alpha * x) * sin(alpha * x) / alpha, 1e-14))
    return failed("snake differs from x + sin^2(alpha x) / alpha");
  if (!within(snake(x, tiny), x + tiny * x * x, 1e-14))
    return failed("snake at a tiny alpha differs from its limit x + alpha x^2");
  if (!within(snake(x, zero), x, 0)) return failed("snake at alpha = 0 is not x");
  std::printf("values of snake: ok\n");

  // 2. Its gradient, with respect to x and alpha, where alpha is 0, tiny, negative, ordinary.
  const Tensor alphas = Tensor::from_vector({0.0, 1e-9, -0.7, 0.5, 1.0, 3.0}, {6}, DType::float64, true);
  gradcheck([](const std::vector<Tensor>& in) { return snake(in[0], in[1]); }, {x, alphas});
  std::printf("gradcheck of snake: ok\n");

  // 3. Bad input is an xgrad::Error naming the op and the shapes.
  try {
    snake(x, Tensor::ones({5}, DType::float64));
    return failed("snake accepted 5 alphas for 6 features");
  } catch (const Error& e) {
    if (std::string(e.what()).rfind("snake: input float64 [4, 6] does not fit alpha float64 [5]", 0) != 0)
      return failed(e.what());
    std::printf("refused: %s\n", e.what());
  }

  // 4. The layer through the module API (converts it to float64 and checks alpha too).
  Snake activation(6, 0.5);
  nn::gradcheck(activation, [&](const std::vector<Tensor>& in) { return activation(in[0]); }, {x});
  std::printf("gradcheck of Snake: ok\n");

  // 5. A classifier built with it: which colour is the square of a 4 x 4 checkerboard
  //    on [-2, 2]^2 that a point falls in?
  manual_seed(1);
  nn::Sequential model{std::make_shared<nn::Linear>(2, 64), std::make_shared<Snake>(64),
                       std::make_shared<nn::Linear>(64, 64), std::make_shared<Snake>(64),
                       std::make_shared<nn::Linear>(64, 2)};
  std::cout << model;
  optim::Adam adam(model.named_parameters(), {.lr = 1e-2});
  const auto make_data = [](Generator& g, std::size_t n) {
    Tensor points = Tensor::uniform({n, 2}, -2.0, 2.0, g);
    const std::vector<double> p = points.to_vector();
    std::vector<std::int64_t> colours;
    for (std::size_t i = 0; i < n; ++i)
      colours.push_back(std::sin(std::numbers::pi * p[2 * i]) * std::sin(std::numbers::pi * p[2 * i + 1]) > 0);
    return std::make_pair(points, Indices(colours, {n}));
  };
  Generator data(2);
  for (int step = 1; step <= 1000; ++step) {
    auto [points, colours] = make_data(data, 128);
    adam.zero_grad();
    Tensor loss = cross_entropy(model(points), colours);
    loss.backward();
    adam.step();
    if (step % 200 == 0) std::printf("step %d  loss %.4f\n", step, loss.item());
  }
  NoGradGuard no_grad;
  Generator held_out(3);
  auto [points, colours] = make_data(held_out, 2000);
  const std::vector<double> logits = model(points).to_vector();
  std::size_t correct = 0;
  for (std::size_t i = 0; i < 2000; ++i) correct += (logits[2 * i + 1] > logits[2 * i]) == (colours.values[i] == 1);
  const double accuracy = correct / 2000.0;
  std::printf("held-out accuracy %.3f\n", accuracy);
  return accuracy >= 0.9 ? 0 : failed("the classifier did not learn the checkerboard (held-out accuracy under 0.9)");
}
