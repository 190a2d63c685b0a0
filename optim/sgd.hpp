#pragma once
// SGD with momentum, dampening, Nesterov and L2 weight decay, as torch.optim.SGD:
//   g = (maximize ? -grad : grad) + weight_decay * p
//   buf = g (first step) or momentum * buf + (1 - dampening) * g
//   g = nesterov ? g + momentum * buf : buf        (when momentum > 0)
//   p -= lr * g

#include "xgrad/optim/optimizer.hpp"

namespace xgrad::optim {

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;  // needs momentum > 0 and dampening 0
  double weight_decay = 0.0;
  bool maximize = false;  // climb the gradient instead
};

class SGD : public OptimizerWith<SGDOptions> {
 public:
  SGD(NamedParameters parameters, const SGDOptions& options);
  SGD(std::vector<ParamGroup> groups, const SGDOptions& options);

 protected:
  void update(std::size_t i, const Tensor& grad, std::int64_t updates) override;
  bool applies_grad_factor() const override { return true; }
  std::vector<std::string> buffer_names(const SGDOptions& group) const override;
};

}  // namespace xgrad::optim
