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
// Each group holds a whole options value of its optimizer's (SGDOptions, AdamOptions):
// the options with the group's overrides made. update() reads its fields; names appear
// only where settings meet text (ParamGroup overrides, state dicts, group_setting and
// errors), through each optimizer's one table of Setting<Options>.
//
// Frozen parameters (requires_grad false) are kept, so that names and state stay the
// same when they are unfrozen, but step() leaves them alone.

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/state.hpp"

namespace xgrad::optim {

using NamedParameters = std::vector<std::pair<std::string, Tensor>>;

// Settings by name, as in state dicts: flags are 1 or 0.
using SettingValues = std::map<std::string, double>;

// One group for every optimizer: every unset value is the optimizer's (its options').
// Setting one the optimizer does not have (beta1 for SGD) is an error. parameters, lr
// and weight_decay come first, so that {params, {}, 0.1} keeps meaning "weight decay 0.1".
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

  SettingValues overrides() const;  // the settings this group sets, by name
};

// One of an optimizer's settings: its name (as in ParamGroup, errors and state dicts)
// and the field of the optimizer's options that holds it. bool fields are flags, read
// and written as 1 or 0.
template <class Options>
struct Setting {
  using Field = std::variant<double Options::*, bool Options::*>;
  const char* name;
  Field field;

  bool is_flag() const { return std::holds_alternative<bool Options::*>(field); }
  double get(const Options& options) const {
    return std::visit([&](auto member) { return static_cast<double>(options.*member); }, field);
  }
  // A flag takes 1 or 0 (check first: any other value would read as true).
  void set(Options& options, double value) const {
    if (is_flag())
      options.*std::get<bool Options::*>(field) = value != 0.0;
    else
      options.*std::get<double Options::*>(field) = value;
  }
};

class Optimizer : public Stateful {
 public:
  // One update of every parameter that requires grad and has a gradient (the others are
  // left alone).
  void step();
  void zero_grad();  // forgets every parameter's gradient

  const std::string& type() const { return type_; }  // "Adam", as in error messages
  double lr() const { return group_lr(0); }          // the first group's
  void set_lr(double lr);                            // every group's
  std::size_t num_groups() const { return num_groups_; }
  double group_lr(std::size_t group) const { return group_setting(group, "lr"); }
  void set_group_lr(std::size_t group, double lr);
  double group_weight_decay(std::size_t group) const { return group_setting(group, "weight_decay"); }
  // Any setting of a group by name ("beta1"); flags read 1 or 0.
  virtual double group_setting(std::size_t group, const std::string& name) const = 0;
  virtual std::vector<std::string> setting_names() const = 0;  // "lr", "weight_decay", ... in order
  std::int64_t step_count() const { return steps_; }           // calls to step() so far
  const NamedParameters& parameters() const { return parameters_; }

  // "group.<g>.<setting>" for every group and setting (flags as 0/1, e.g.
  // "group.0.nesterov"), "step", and per parameter "state.<name>.<buffer>" (e.g.
  // exp_avg) and "state.<name>.step" for the parameters that have been updated.
  // load_state_dict also reads older checkpoints' "lr" (group 0's rate) and
  // "group.<g>.lr", which hold only rates: the other settings then stay as they are.
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state, bool strict = true) override;

 protected:
  // `type` names the optimizer in error messages ("Adam"); the groups' parameters are
  // checked and kept here, their settings by OptimizerWith.
  Optimizer(std::string type, const std::vector<ParamGroup>& groups);

  // Updates parameter i (whose gradient exists); `updates` counts this parameter's
  // updates including this one.
  virtual void update(std::size_t i, const Tensor& grad, std::int64_t updates) = 0;
  // Parameter i's buffer `name`, zero-filled (param's shape and dtype) on first use;
  // `created` tells whether this call made it.
  Tensor& buffer(std::size_t i, const std::string& name, bool* created = nullptr);
  // Throws unless parameter i, its gradient and its buffers agree in shape and dtype.
  void check_state(std::size_t i, const Tensor& grad) const;
  std::size_t group_of(std::size_t i) const { return group_of_[i]; }  // parameter i's group
  void check_group(std::size_t group) const;                          // throws unless it exists

  // A group's settings by name (as setting_names(); flags 1 or 0), for load_state_dict
  // and set_group_lr: check_settings weighs them with `changes` made, changing nothing,
  // and change_settings makes changes that passed. OptimizerWith implements both.
  struct SettingsCheck {
    std::vector<std::string> problems;  // e.g. "eps -1.0 must be finite and >= 0"; none when valid
    std::vector<std::string> buffers;   // those update() keeps under them, e.g. {"exp_avg", "exp_avg_sq"}
  };
  virtual SettingsCheck check_settings(std::size_t group, const SettingValues& changes) const = 0;
  virtual void change_settings(std::size_t group, const SettingValues& changes) = 0;

 private:
  struct ParamState {
    std::int64_t updates = 0;
    std::map<std::string, Tensor> buffers;
  };
  std::string type_;
  NamedParameters parameters_;         // every group's, in order
  std::vector<std::size_t> group_of_;  // parameters_[i] belongs to group group_of_[i]
  std::size_t num_groups_;
  std::vector<ParamState> state_;
  std::int64_t steps_ = 0;
};

// An optimizer whose groups each hold an Options (SGDOptions, AdamOptions), which has
// at least lr and weight_decay. `settings` names the fields, lr and weight_decay first;
// `check` says what is wrong with an Options beyond those two, as phrases such as
// "momentum -1.0 must be finite and >= 0" (nothing when it is valid).
template <class Options>
class OptimizerWith : public Optimizer {
 public:
  using Check = std::vector<std::string> (*)(const Options& options);

  // A group's settings: the options with the group's overrides made.
  const Options& group_options(std::size_t group) const {
    check_group(group);
    return groups_[group];
  }
  double group_setting(std::size_t group, const std::string& name) const override {
    const Options& options = group_options(group);
    return setting(name).get(options);
  }
  std::vector<std::string> setting_names() const override {
    std::vector<std::string> names;
    for (const Setting<Options>& s : settings_) names.push_back(s.name);
    return names;
  }

 protected:
  OptimizerWith(std::string type, const std::vector<ParamGroup>& groups, const Options& options,
                std::span<const Setting<Options>> settings, Check check);
  // The buffers update() keeps for a parameter of a group with these settings.
  virtual std::vector<std::string> buffer_names(const Options& group) const = 0;

 private:
  SettingsCheck check_settings(std::size_t group, const SettingValues& changes) const override;
  void change_settings(std::size_t group, const SettingValues& changes) override {
    for (const auto& [name, value] : changes) setting(name).set(groups_[group], value);
  }
  const Setting<Options>* find_setting(std::string_view name) const {
    for (const Setting<Options>& s : settings_)
      if (s.name == name) return &s;
    return nullptr;
  }
  const Setting<Options>& setting(const std::string& name) const {
    const Setting<Options>* found = find_setting(name);
    if (!found) fail(type(), "has no setting '", name, "' (it has ", listed(setting_names()), ")");
    return *found;
  }
  std::vector<std::string> invalid(const Options& options) const;

  std::span<const Setting<Options>> settings_;  // the optimizer's table, which outlives it
  Check check_;
  std::vector<Options> groups_;
};

template <class Options>
OptimizerWith<Options>::OptimizerWith(std::string type, const std::vector<ParamGroup>& groups, const Options& options,
                                      std::span<const Setting<Options>> settings, Check check)
    : Optimizer(std::move(type), groups), settings_(settings), check_(check) {
  XGRAD_CHECK(settings_.size() >= 2 && settings_[0].name == std::string_view("lr") &&
                  settings_[1].name == std::string_view("weight_decay"),
              this->type(), "an optimizer's settings must start with lr and weight_decay");
  // The options first: every group that leaves a bad option unset would repeat it.
  const std::vector<std::string> bad_options = invalid(options);
  if (!bad_options.empty()) fail(this->type(), listed(bad_options, "; "));
  std::vector<std::string> bad_groups;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    Options& group = groups_.emplace_back(options);
    for (const auto& [name, value] : groups[g].overrides()) {
      const Setting<Options>* s = find_setting(name);
      XGRAD_CHECK(s, this->type(), "group ", g, " sets ", name, ", which ", this->type(), " does not have");
      s->set(group, value);
    }
    for (const std::string& problem : invalid(group)) bad_groups.push_back(str("group ", g, ": ", problem));
  }
  if (!bad_groups.empty()) fail(this->type(), listed(bad_groups, "; "));
}

template <class Options>
std::vector<std::string> OptimizerWith<Options>::invalid(const Options& o) const {
  std::vector<std::string> found;
  if (!(o.lr >= 0.0) || !std::isfinite(o.lr)) found.push_back(str("learning rate ", o.lr, " must be finite and >= 0"));
  if (!(o.weight_decay >= 0.0) || !std::isfinite(o.weight_decay))
    found.push_back(str("weight_decay ", o.weight_decay, " must be finite and >= 0"));
  for (std::string& problem : check_(o)) found.push_back(std::move(problem));
  return found;
}

template <class Options>
auto OptimizerWith<Options>::check_settings(std::size_t group, const SettingValues& changes) const -> SettingsCheck {
  Options changed = group_options(group);
  std::vector<std::string> problems;
  for (const auto& [name, value] : changes) {
    const Setting<Options>& s = setting(name);
    if (s.is_flag() && value != 0.0 && value != 1.0)  // a bool would take it as true
      problems.push_back(str(name, " ", value, " must be 0 or 1"));
    else
      s.set(changed, value);
  }
  for (std::string& problem : invalid(changed)) problems.push_back(std::move(problem));
  return {std::move(problems), buffer_names(changed)};
}

}  // namespace xgrad::optim
