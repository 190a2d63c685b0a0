#pragma once
// Snake (Ziyin, Hartwig & Ueda, "Neural Networks Fail to Learn Periodic Functions and How
// to Fix It", NeurIPS 2020): an activation with a periodic part and a learned frequency,
// as a new differentiable op with its own backward, and as a layer:
//   y = x + sin^2(alpha x) / alpha      one alpha per feature (the last axis)
// It never decreases (its slope 1 + sin(2 alpha x) lies in [0, 2]) yet has a periodic
// part, which the paper shows lets a network fit and extend periodic patterns.
//
// alpha near 0: sin^2(alpha x) / alpha = x sin(alpha x) * sinc(alpha x), with
// sinc(u) = sin(u) / u and sinc(0) = 1, so the op is computed without dividing by alpha.
// It is smooth for every real alpha: at alpha = 0 it is exactly x (the limit of
// x + alpha x^2), and a negative alpha mirrors the periodic part. Training may move
// alpha through 0 without a NaN or an infinite gradient.

#include <xgrad/autograd/function.hpp>
#include <xgrad/nn/module.hpp>

// The op: x [..., d], alpha [d] of x's dtype. Forward and backward are raw loops
// registered with CustomOp.
xgrad::Tensor snake(const xgrad::Tensor& x, const xgrad::Tensor& alpha);

// The layer: one learned alpha per feature, each starting at `alpha`.
class Snake : public xgrad::nn::Module {
 public:
  explicit Snake(std::size_t d, double alpha = 1.0);
  xgrad::Tensor forward(const xgrad::Tensor& x) override;
  std::string extra_repr() const override;

  xgrad::Tensor alpha;
};
