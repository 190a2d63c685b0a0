// xgrad-demo: trains a small MLP to separate two interleaved spirals, using nothing but
// the autograd engine (tensors, ops, backward). It stands in as `./run train` until the
// command-line trainer for sequence tasks lands.
//
//   xgrad-demo [steps] [seed]

#include <chrono>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <string>

#include "autograd/ops.hpp"
#include "autograd/random.hpp"

using namespace xgrad;

namespace {

struct Dataset {
  Tensor points;    // [n, 2]
  Indices classes;  // [n]
};

// Two spirals, one per class, each point jittered a little.
Dataset make_spirals(std::size_t per_class, Generator& gen) {
  std::vector<double> xy;
  std::vector<std::int64_t> labels;
  for (int label = 0; label < 2; ++label)
    for (std::size_t i = 0; i < per_class; ++i) {
      const double t = 0.25 + 3.0 * std::numbers::pi * static_cast<double>(i) / static_cast<double>(per_class);
      const double angle = t + label * std::numbers::pi;
      const double radius = t / (3.0 * std::numbers::pi);
      xy.push_back(radius * std::cos(angle) + 0.02 * gen.normal());
      xy.push_back(radius * std::sin(angle) + 0.02 * gen.normal());
      labels.push_back(label);
    }
  const std::size_t n = 2 * per_class;
  return {Tensor::from_vector(xy, {n, 2}), Indices(labels, {n})};
}

// Uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)), PyTorch's default for Linear.
Tensor init_param(Shape shape, std::size_t fan_in, Generator& gen) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  return Tensor::uniform(std::move(shape), -bound, bound, gen).requires_grad_();
}

// Adam (Kingma & Ba), enough for the demo; optim/ will hold the real optimizers.
struct Adam {
  std::vector<Tensor> params;
  double lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  std::vector<std::vector<float>> m, v;
  int t = 0;

  void step() {
    if (m.empty())
      for (const Tensor& p : params) {
        m.emplace_back(p.numel(), 0.0f);
        v.emplace_back(p.numel(), 0.0f);
      }
    ++t;
    const double c1 = 1.0 - std::pow(beta1, t), c2 = 1.0 - std::pow(beta2, t);
    for (std::size_t i = 0; i < params.size(); ++i) {
      float* w = params[i].data<float>();
      const Tensor grad = params[i].grad();
      const float* g = grad.data<float>();
      for (std::size_t j = 0; j < m[i].size(); ++j) {
        m[i][j] = static_cast<float>(beta1 * m[i][j] + (1 - beta1) * g[j]);
        v[i][j] = static_cast<float>(beta2 * v[i][j] + (1 - beta2) * g[j] * g[j]);
        w[j] -= static_cast<float>(lr * (m[i][j] / c1) / (std::sqrt(v[i][j] / c2) + eps));
      }
    }
  }
};

double accuracy(const Tensor& logits, const Indices& classes) {
  const std::vector<double> z = logits.to_vector();
  std::size_t correct = 0;
  for (std::size_t i = 0; i < classes.numel(); ++i)
    correct += (z[2 * i + 1] > z[2 * i]) == (classes.values[i] == 1);
  return static_cast<double>(correct) / static_cast<double>(classes.numel());
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::stoi(argv[1]) : 1500;
  Generator gen(argc > 2 ? std::stoull(argv[2]) : 0);
  const Dataset train = make_spirals(200, gen);
  const Dataset held_out = make_spirals(100, gen);

  const std::size_t hidden = 64;
  Tensor w1 = init_param({2, hidden}, 2, gen), b1 = init_param({hidden}, 2, gen);
  Tensor w2 = init_param({hidden, hidden}, hidden, gen), b2 = init_param({hidden}, hidden, gen);
  Tensor w3 = init_param({hidden, 2}, hidden, gen), b3 = init_param({2}, hidden, gen);
  const auto model = [&](const Tensor& x) {
    Tensor h = tanh(matmul(x, w1) + b1);
    h = tanh(matmul(h, w2) + b2);
    return matmul(h, w3) + b3;
  };
  Adam adam{{w1, b1, w2, b2, w3, b3}};

  std::printf("xgrad-demo: MLP 2-%zu-%zu-2 on two spirals (%zu train, %zu held-out points)\n", hidden,
              hidden, train.classes.numel(), held_out.classes.numel());
  const auto start = std::chrono::steady_clock::now();
  double held_out_accuracy = 0;
  for (int step = 1; step <= steps; ++step) {
    Tensor loss = cross_entropy(model(train.points), train.classes);
    for (Tensor& p : adam.params) p.zero_grad();
    loss.backward();
    adam.step();
    if (step % 250 == 0 || step == steps) {
      NoGradGuard no_grad;
      held_out_accuracy = accuracy(model(held_out.points), held_out.classes);
      std::printf("step %5d  loss %.4f  train acc %.3f  held-out acc %.3f\n", step, loss.item(),
                  accuracy(model(train.points), train.classes), held_out_accuracy);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("done in %.2f s: held-out accuracy %.3f\n", seconds, held_out_accuracy);
  return held_out_accuracy >= 0.95 ? 0 : 1;
}
