#pragma once
// LayerNorm and RMSNorm over the trailing axes `normalized_shape`, as torch.nn.LayerNorm
// and torch.nn.RMSNorm (PyTorch 2.4+). LayerNorm(d) normalizes the last axis; weight
// starts at ones, bias at zeros, both of the normalized shape.

#include <optional>

#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

class LayerNorm : public Module {
 public:
  explicit LayerNorm(std::size_t d, double eps = 1e-5, bool elementwise_affine = true);
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Shape normalized_shape;
  double eps;
  Tensor weight, bias;  // undefined without elementwise_affine
};

// y = x / sqrt(mean(x^2) + eps) * weight, the mean over the normalized axes. No eps (the
// default) means the machine epsilon of the input's dtype, torch.finfo(dtype).eps, as
// PyTorch's eps=None. weight starts at ones.
class RMSNorm : public Module {
 public:
  explicit RMSNorm(std::size_t d, std::optional<double> eps = std::nullopt, bool elementwise_affine = true);
  explicit RMSNorm(Shape normalized_shape, std::optional<double> eps = std::nullopt, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Shape normalized_shape;
  std::optional<double> eps;
  Tensor weight;  // undefined without elementwise_affine
};

}  // namespace xgrad::nn
