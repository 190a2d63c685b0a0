#pragma once
// Optimizer: updates a set of named parameters from their gradients, as torch.optim.
//
//   optim::Adam adam(model.named_parameters(), {.lr = 3e-3});
//   adam.zero_grad(); loss.backward(); adam.step();
//
// Its state (moments, step counts, every group's settings) is a StateDict, so
// checkpoints hold it.
//
// Parameter groups (PyTorch's param_groups): each group may set any of the optimizer's
// settings (learning rate, weight decay, momentum, betas, ...); what it leaves unset
// comes from the optimizer's options.
//
//   optim::AdamW opt({{decayed, {}, 0.1}, {not_decayed, {}, 0.0}}, {.lr = 1e-3});
//   optim::SGD sgd({{.parameters = body}, {.parameters = head, .lr = 0.1, .nesterov = true}},
//                  {.lr = 0.01, .momentum = 0.9});
//
// Frozen parameters (requires_grad false) are kept, so that names and state stay the
// same when they are unfrozen, but step() leaves them alone.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "xgrad/autograd/state.hpp"

namespace xgrad::optim {

using NamedParameters = std::vector<std::pair<std::string, Tensor>>;

// Every unset value is the optimizer's (its options'). Setting one the optimizer does
// not have (beta1 for SGD) is an error. parameters, lr and weight_decay come first, so
// that {params, {}, 0.1} keeps meaning "weight decay 0.1".
struct ParamGroup {
  NamedParameters parameters = {};
  std::optional<double> lr = {};
  std::optional<double> weight_decay = {};
  std::optional<double> momentum = {};   // SGD
  std::optional<double> dampening = {};  // SGD
  std::optional<bool> nesterov = {};     // SGD
  std::optional<double> beta1 = {};      // Adam, AdamW
  std::optional<double> beta2 = {};      // Adam, AdamW
  std::optional<double> eps = {};        // Adam, AdamW
  std::optional<bool> amsgrad = {};      // Adam, AdamW
  std::optional<bool> maximize = {};     // every optimizer
};

class Optimizer : public Stateful {
 public:
  // One of an optimizer's settings: its name (as in ParamGroup, errors and state dicts),
  // its default (the options') and whether it is a flag (true and false held as 1 and 0).
  struct Setting {
    std::string name;
    double value;
    bool flag = false;
  };
  // What is wrong with one group's values (in the settings' order), as phrases such as
  // "momentum -1 must be finite and >= 0"; nothing when they are valid. lr, weight_decay
  // and the flags are checked by Optimizer itself.
  using Check = std::vector<std::string> (*)(const std::vector<double>& values);

  // Where lr and weight_decay, every optimizer's first settings, sit in a group's values.
  static constexpr std::size_t kLr = 0, kWeightDecay = 1;

  // `type` names the optimizer in error messages ("Adam"); `settings` are its settings
  // with their defaults, starting with lr and weight_decay; `check` validates the rest.
  Optimizer(std::string type, std::vector<ParamGroup> groups, std::vector<Setting> settings, Check check);

  // One update of every parameter that requires grad and has a gradient (the others are
  // left alone).
  void step();
  void zero_grad();  // forgets every parameter's gradient

  const std::string& type() const { return type_; }  // "Adam", as in error messages
  double lr() const { return group_lr(0); }          // the first group's
  void set_lr(double lr);                            // every group's
  std::size_t num_groups() const { return groups_.size(); }
  double group_lr(std::size_t group) const { return group_settings(group)[kLr]; }
  void set_group_lr(std::size_t group, double lr);
  double group_weight_decay(std::size_t group) const { return group_settings(group)[kWeightDecay]; }
  // Any setting of a group by name ("beta1"); flags read 1 or 0.
  double group_setting(std::size_t group, const std::string& name) const;
  std::vector<std::string> setting_names() const;     // "lr", "weight_decay", ... in order
  std::int64_t step_count() const { return steps_; }  // calls to step() so far
  const NamedParameters& parameters() const { return parameters_; }

  // "group.<g>.<setting>" for every group and setting (flags as 0/1, e.g.
  // "group.0.nesterov"), "step", and per parameter "state.<name>.<buffer>" (e.g.
  // exp_avg) and "state.<name>.step" for the parameters that have been updated.
  // load_state_dict also reads older checkpoints' "lr" (group 0's rate) and
  // "group.<g>.lr", which hold only rates: the other settings then stay as they are.
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state, bool strict = true) override;

 protected:
  // Updates parameter i (whose gradient exists); `updates` counts this parameter's
  // updates including this one.
  virtual void update(std::size_t i, const Tensor& grad, std::int64_t updates) = 0;
  // The buffers update() keeps for a parameter of a group with these settings, e.g.
  // {"exp_avg", "exp_avg_sq"}.
  virtual std::vector<std::string> buffer_names(const std::vector<double>& settings) const = 0;
  // Parameter i's buffer `name`, zero-filled (param's shape and dtype) on first use;
  // `created` tells whether this call made it.
  Tensor& buffer(std::size_t i, const std::string& name, bool* created = nullptr);
  // Throws unless parameter i, its gradient and its buffers agree in shape and dtype.
  void check_state(std::size_t i, const Tensor& grad) const;
  // A group's settings, and parameter i's (its group's), in the settings' order.
  const std::vector<double>& group_settings(std::size_t group) const;
  const std::vector<double>& settings_of(std::size_t i) const { return groups_[group_of_[i]]; }

 private:
  struct ParamState {
    std::int64_t updates = 0;
    std::map<std::string, Tensor> buffers;
  };
  // What is wrong with a group's values: the base's checks, then the optimizer's.
  std::vector<std::string> invalid(const std::vector<double>& values) const;
  std::string type_;
  std::vector<Setting> settings_;  // the optimizer's, with its defaults
  Check check_;
  NamedParameters parameters_;               // every group's, in order
  std::vector<std::size_t> group_of_;        // parameters_[i] belongs to groups_[group_of_[i]]
  std::vector<std::vector<double>> groups_;  // each group's settings, in settings_' order
  std::vector<ParamState> state_;
  std::int64_t steps_ = 0;
};

}  // namespace xgrad::optim
