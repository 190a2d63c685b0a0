#pragma once
// Adam and AdamW, as torch.optim (t counts this parameter's updates):
//   g = maximize ? -grad : grad
//   g += weight_decay * p for Adam; AdamW instead first does p *= 1 - lr * weight_decay
//   m = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2
//   v_hat = amsgrad ? max(v_hat, v) : v
//   p -= lr / (1 - beta1^t) * m / (sqrt(v_hat) / sqrt(1 - beta2^t) + eps)
//
// AdamW is Adam with decoupled weight decay: one class template, AdamOf<kDecoupled>,
// with one table of settings. The choice is a type, not a runtime flag, so that each
// keeps PyTorch's default weight decay (Adam 0, AdamW 0.01) in designated initializers:
// optim::AdamW(params, {.lr = 1e-3, .beta2 = 0.99}) decays by 0.01.

#include "xgrad/optim/optimizer.hpp"

namespace xgrad::optim {

template <bool kDecoupled>
struct AdamOptionsOf {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  // Adam: L2, added to the gradient; AdamW: decoupled, shrinks the parameter directly.
  double weight_decay = kDecoupled ? 0.01 : 0.0;
  bool amsgrad = false;
  bool maximize = false;  // climb the gradient instead
};
using AdamOptions = AdamOptionsOf<false>;
using AdamWOptions = AdamOptionsOf<true>;

template <bool kDecoupled>
class AdamOf : public OptimizerWith<AdamOptionsOf<kDecoupled>> {
 public:
  using Options = AdamOptionsOf<kDecoupled>;
  AdamOf(NamedParameters parameters, const Options& options = {});
  AdamOf(std::vector<ParamGroup> groups, const Options& options = {});

 protected:
  void update(std::size_t i, const Tensor& grad, std::int64_t updates) override;
  bool applies_grad_factor() const override { return true; }
  std::optional<std::string> buffer_problem(const std::string& name, const Tensor& buffer) const override;
  std::vector<std::string> buffers_of_every_update() const override { return {"exp_avg", "exp_avg_sq"}; }
  std::vector<std::string> buffer_names(const Options& group) const override;
};

extern template class AdamOf<false>;
extern template class AdamOf<true>;
using Adam = AdamOf<false>;
using AdamW = AdamOf<true>;

}  // namespace xgrad::optim
