#pragma once
// RMSNorm (Zhang & Sennrich, 2019) as a new differentiable op with its own backward,
// and as a layer:
//   y = x / rms(x) * weight,   rms(x) = sqrt(mean(x^2) + eps)   over the last axis

#include <xgrad/autograd/function.hpp>
#include <xgrad/nn/module.hpp>

// The op: forward and backward are raw loops over each row, registered with CustomOp.
xgrad::Tensor rms_norm(const xgrad::Tensor& x, const xgrad::Tensor& weight, double eps = 1e-6);

// The layer: one learned scale per feature, starting at 1.
class RMSNorm : public xgrad::nn::Module {
 public:
  explicit RMSNorm(std::size_t d, double eps = 1e-6);
  xgrad::Tensor forward(const xgrad::Tensor& x) override;
  std::string extra_repr() const override;

  xgrad::Tensor weight;
  double eps;
};
