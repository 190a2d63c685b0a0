#pragma once
// Stateless layers around the activation ops, and Dropout.

#include <memory>

#include "xgrad/autograd/random.hpp"
#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

// PyTorch's activation="relu" / "gelu" (exact); gelu_tanh is GELU's tanh form
// (F.gelu(approximate="tanh"), GPT-2's "gelu_new").
enum class Activation { relu, gelu, gelu_tanh };

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
};

class GELU : public Module {
 public:
  explicit GELU(bool tanh_form = false) : approximate(tanh_form) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  bool approximate;  // the tanh form
};

class Softmax : public Module {
 public:
  explicit Softmax(int over = -1) : axis(over) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  int axis;
};

class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(int over = -1) : axis(over) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  int axis;
};

// Zeroes each element with probability p in training mode and scales the rest by
// 1 / (1 - p); the identity in eval mode. Draws from `generator` when one is given,
// else from the process-wide default (xgrad::manual_seed).
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, std::shared_ptr<Generator> generator = nullptr);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double p;
  std::shared_ptr<Generator> generator;
};

}  // namespace xgrad::nn
