#pragma once
// Optimizer: updates a set of named parameters from their gradients, as torch.optim.
//
//   optim::Adam adam(model.named_parameters(), {.lr = 3e-3});
//   adam.zero_grad(); loss.backward(); adam.step();
//
// Its state (moments, step counts, learning rates) is a StateDict, so checkpoints hold it.
//
// Parameter groups (PyTorch's param_groups): each group may set its own learning rate
// and weight decay; what it leaves unset comes from the optimizer's options.
//
//   optim::AdamW opt({{decayed, {}, 0.1}, {not_decayed, {}, 0.0}}, {.lr = 1e-3});

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "xgrad/autograd/state.hpp"

namespace xgrad::optim {

using NamedParameters = std::vector<std::pair<std::string, Tensor>>;

struct ParamGroup {
  NamedParameters parameters = {};
  std::optional<double> lr = {};            // else the optimizer's
  std::optional<double> weight_decay = {};  // else the optimizer's
};

class Optimizer : public Stateful {
 public:
  // `type` names the optimizer in error messages ("Adam"); lr and weight_decay are the
  // defaults for groups that do not set their own.
  Optimizer(std::string type, std::vector<ParamGroup> groups, double lr, double weight_decay);

  // One update of every parameter that has a gradient (the others are left alone).
  void step();
  void zero_grad();  // forgets every parameter's gradient

  const std::string& type() const { return type_; }  // "Adam", as in error messages
  double lr() const { return groups_[0].lr; }        // the first group's
  void set_lr(double lr);                            // every group's
  std::size_t num_groups() const { return groups_.size(); }
  double group_lr(std::size_t group) const { return groups_.at(group).lr; }
  void set_group_lr(std::size_t group, double lr);
  double group_weight_decay(std::size_t group) const { return groups_.at(group).weight_decay; }
  std::int64_t step_count() const { return steps_; }  // calls to step() so far
  const NamedParameters& parameters() const { return parameters_; }

  // "lr" (the first group's), "group.<g>.lr" for any further group, "step", and per
  // parameter "state.<name>.<buffer>" (e.g. exp_avg) and "state.<name>.step" for the
  // parameters that have been updated.
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
  // Parameter i's learning rate and weight decay (its group's).
  double lr_of(std::size_t i) const { return groups_[group_of_[i]].lr; }
  double weight_decay_of(std::size_t i) const { return groups_[group_of_[i]].weight_decay; }

 private:
  struct ParamState {
    std::int64_t updates = 0;
    std::map<std::string, Tensor> buffers;
  };
  struct Group {
    double lr, weight_decay;
  };
  std::string type_;
  NamedParameters parameters_;         // every group's, in order
  std::vector<std::size_t> group_of_;  // parameters_[i] belongs to groups_[group_of_[i]]
  std::vector<Group> groups_;
  std::vector<ParamState> state_;
  std::int64_t steps_ = 0;
};

}  // namespace xgrad::optim
