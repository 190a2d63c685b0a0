// The custom layer end to end: check the new op's gradient in float64, check the layer
// (parameters included), then train a small classifier that uses it.

#include <cstdio>
#include <iostream>
#include <xgrad/xgrad.hpp>  // the whole public API

#include "rms_norm.hpp"

using namespace xgrad;

int main() {
  // 1. The op alone, in float64: input and weight are both checked.
  Generator gen(0);
  Tensor x = Tensor::randn({3, 5}, gen, DType::float64).requires_grad_();
  Tensor w = Tensor::randn({5}, gen, DType::float64).requires_grad_();
  gradcheck([](const std::vector<Tensor>& in) { return rms_norm(in[0], in[1]); }, {x, w});
  std::printf("gradcheck of rms_norm: ok\n");

  // 2. The layer through the module API (converts it to float64 and checks its weight too).
  RMSNorm norm(5);
  nn::gradcheck(norm, [&](const std::vector<Tensor>& in) { return norm(in[0]); }, {x});
  std::printf("gradcheck of RMSNorm: ok\n");

  // 3. A classifier built with it: is the sum of 8 inputs positive?
  manual_seed(1);
  nn::Sequential model{std::make_shared<nn::Linear>(8, 32), std::make_shared<RMSNorm>(32), std::make_shared<nn::GELU>(),
                       std::make_shared<nn::Linear>(32, 2)};
  std::cout << model;
  optim::Adam adam(model.named_parameters(), {.lr = 1e-2});
  const auto make_data = [](Generator& g, std::size_t n) {
    Tensor inputs = Tensor::randn({n, 8}, g);
    std::vector<std::int64_t> labels;
    const std::vector<double> v = sum(inputs, {1}).to_vector();
    for (double s : v) labels.push_back(s > 0);
    return std::make_pair(inputs, Indices(labels, {n}));
  };
  Generator data(2);
  double loss_value = 0;
  for (int step = 1; step <= 300; ++step) {
    auto [inputs, labels] = make_data(data, 64);
    adam.zero_grad();
    Tensor loss = cross_entropy(model(inputs), labels);
    loss.backward();
    adam.step();
    loss_value = loss.item();
    if (step % 100 == 0) std::printf("step %d  loss %.4f\n", step, loss_value);
  }
  NoGradGuard no_grad;
  Generator held_out(3);
  auto [inputs, labels] = make_data(held_out, 1000);
  const std::vector<double> logits = model(inputs).to_vector();
  std::size_t correct = 0;
  for (std::size_t i = 0; i < 1000; ++i) correct += (logits[2 * i + 1] > logits[2 * i]) == (labels.values[i] == 1);
  const double accuracy = correct / 1000.0;
  std::printf("held-out accuracy %.3f\n", accuracy);
  return accuracy >= 0.9 ? 0 : 1;
}
