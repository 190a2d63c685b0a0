#pragma once
// Linear(in, out, bias): y = x W^T + b over the last axis, any number of leading axes.
// PyTorch's layout and default initialization: weight [out, in] and bias [out], both
// U(-1/sqrt(in), 1/sqrt(in)).

#include "xgrad/autograd/random.hpp"
#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

class Linear : public Module {
 public:
  Linear(std::size_t in_features, std::size_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters(Generator& gen = default_generator());

  std::size_t in_features, out_features;
  Tensor weight;
  Tensor bias;  // undefined without bias
};

}  // namespace xgrad::nn
