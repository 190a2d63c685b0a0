#pragma once
// Adam and AdamW, as torch.optim (t counts this parameter's updates):
//   g = maximize ? -grad : grad
//   g += weight_decay * p for Adam; AdamW instead first does p *= 1 - lr * weight_decay
//   m = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2
//   v_hat = amsgrad ? max(v_hat, v) : v
//   p -= lr / (1 - beta1^t) * m / (sqrt(v_hat) / sqrt(1 - beta2^t) + eps)

#include "xgrad/optim/optimizer.hpp"

namespace xgrad::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // L2, added to the gradient
  bool amsgrad = false;
  bool maximize = false;  // climb the gradient instead
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // decoupled: shrinks the parameter directly
  bool amsgrad = false;
  bool maximize = false;  // climb the gradient instead
};

// Groups hold AdamOptions, AdamW's too (group_options(g): its weight_decay is then the
// decoupled one).
class Adam : public OptimizerWith<AdamOptions> {
 public:
  Adam(NamedParameters parameters, const AdamOptions& options = {});
  Adam(std::vector<ParamGroup> groups, const AdamOptions& options = {});

 protected:
  Adam(std::string type, std::vector<ParamGroup> groups, const AdamOptions& options, bool decoupled);
  void update(std::size_t i, const Tensor& grad, std::int64_t updates) override;
  std::vector<std::string> buffer_names(const AdamOptions& group) const override;

 private:
  bool decoupled_;  // AdamW's weight decay
};

class AdamW : public Adam {
 public:
  AdamW(NamedParameters parameters, const AdamWOptions& options = {});
  AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options = {});
};

}  // namespace xgrad::optim
