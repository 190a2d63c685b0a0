#pragma once
// LayerNorm(d, eps, elementwise_affine) over the last axis, as torch.nn.LayerNorm with
// normalized_shape = d: weight starts at ones, bias at zeros.

#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

class LayerNorm : public Module {
 public:
  explicit LayerNorm(std::size_t d, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  std::size_t d;
  double eps;
  Tensor weight, bias;  // undefined without elementwise_affine
};

}  // namespace xgrad::nn
