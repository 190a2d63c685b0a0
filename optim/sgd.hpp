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

class SGD : public Optimizer {
 public:
  SGD(NamedParameters parameters, const SGDOptions& options);
  SGD(std::vector<ParamGroup> groups, const SGDOptions& options);
  const SGDOptions& options() const { return options_; }  // the defaults groups start from
  SGDOptions group_options(std::size_t group) const;      // a group's own

 protected:
  void update(std::size_t i, const Tensor& grad, std::int64_t updates) override;
  std::vector<std::string> buffer_names(const std::vector<double>& settings) const override;

 private:
  SGDOptions options_;
};

}  // namespace xgrad::optim
