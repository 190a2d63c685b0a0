#pragma once
// Optimizer: updates a set of named parameters from their gradients, as torch.optim.
//
//   optim::Adam adam(model.named_parameters(), {.lr = 3e-3});
//   adam.zero_grad(); loss.backward(); adam.step();
//
// Its state (moments, step counts, learning rate) is a StateDict, so checkpoints hold it.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "xgrad/autograd/state.hpp"

namespace xgrad::optim {

using NamedParameters = std::vector<std::pair<std::string, Tensor>>;

class Optimizer : public Stateful {
 public:
  // `type` names the optimizer in error messages ("Adam").
  Optimizer(std::string type, NamedParameters parameters, double lr);

  // One update of every parameter that has a gradient (the others are left alone).
  void step();
  void zero_grad();  // forgets every parameter's gradient

  const std::string& type() const { return type_; }  // "Adam", as in error messages
  double lr() const { return lr_; }
  void set_lr(double lr);
  std::int64_t step_count() const { return steps_; }  // calls to step() so far
  const NamedParameters& parameters() const { return parameters_; }

  // "lr", "step", and per parameter "state.<name>.<buffer>" (e.g. exp_avg) and
  // "state.<name>.step" for the parameters that have been updated.
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state, bool strict = true) override;

 protected:
  // Updates parameter i (whose gradient exists); `updates` counts this parameter's
  // updates including this one.
  virtual void update(std::size_t i, const Tensor& grad, std::int64_t updates) = 0;
  // The buffers update() keeps for each parameter, e.g. {"exp_avg", "exp_avg_sq"}.
  virtual std::vector<std::string> buffer_names() const = 0;
  // Parameter i's buffer `name`, zero-filled (param's shape and dtype) on first use;
  // `created` tells whether this call made it.
  Tensor& buffer(std::size_t i, const std::string& name, bool* created = nullptr);
  // Throws unless parameter i, its gradient and its buffers agree in shape and dtype.
  void check_state(std::size_t i, const Tensor& grad) const;

 private:
  struct ParamState {
    std::int64_t updates = 0;
    std::map<std::string, Tensor> buffers;
  };
  std::string type_;
  NamedParameters parameters_;
  std::vector<ParamState> state_;
  double lr_;
  std::int64_t steps_ = 0;
};

}  // namespace xgrad::optim
