#pragma once
// Optimizer: updates a set of named parameters from their gradients, as torch.optim.
//
//   optim::Adam adam(model.named_parameters(), {.lr = 3e-3});
//   adam.zero_grad(); loss.backward(); adam.step();
//
// Its state (moments, step counts, every group's settings) is a StateDict, so
// checkpoints hold it.
//
// Parameter groups (PyTorch's param_groups): each group may override any of its
// optimizer's settings, by name; what it leaves unset comes from the optimizer's options.
//
//   optim::AdamW opt({{decayed, {{"weight_decay", 0.1}}}, {not_decayed, {{"weight_decay", 0.0}}}}, {.lr = 1e-3});
//   optim::SGD sgd({{.parameters = body}, {.parameters = head, .settings = {{"lr", 0.1}, {"nesterov", 1}}}},
//                  {.lr = 0.01, .momentum = 0.9});
//
// Each optimizer names its settings in one table of Setting<Options> rows over its
// options struct (SGDOptions, AdamOptions): a row gives the name (as in ParamGroup,
// state dicts, group_setting and errors), the field, and the values it accepts. Each
// group holds a whole Options, the options with the group's overrides made, and
// update() reads its fields. Optimizer itself knows one setting, "lr", which every
// optimizer has (schedules set it); an optimizer written elsewhere declares its own
// table the same way (docs/optim.md, "Writing your own optimizer").
//
// Frozen parameters (requires_grad false) are kept, so that names and state stay the
// same when they are unfrozen, but step() leaves them alone.

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
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

// Some of the parameters, and the settings they take other than the optimizer's
// options, by the optimizer's names: {params, {{"weight_decay", 0.1}}}. A name the
// optimizer does not have (beta1 for SGD) is an error when the optimizer is made.
struct ParamGroup {
  NamedParameters parameters = {};
  SettingValues settings = {};
};

// The values a numeric setting accepts: finite, in [min, max], or [min, max) when
// max_excluded. The default accepts any finite number.
struct Range {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool max_excluded = false;

  bool contains(double value) const {
    return std::isfinite(value) && value >= min && (max_excluded ? value < max : value <= max);
  }
  // Why `value` is out of range for the setting `name`: "beta1 1.5 must lie in [0, 1)"
  // ("learning rate ..." for lr).
  std::string problem(std::string_view name, double value) const;
};

// One of an optimizer's settings: its name, the field of the optimizer's options that
// holds it, and the values it accepts. bool fields are flags, read and written as 1 or 0.
template <class Options>
struct Setting {
  using Field = std::variant<double Options::*, bool Options::*>;
  const char* name;
  Field field;
  Range range = {};  // a number's; a flag takes 1 or 0

  bool is_flag() const { return std::holds_alternative<bool Options::*>(field); }
  double get(const Options& options) const {
    return std::visit([&](auto member) { return static_cast<double>(options.*member); }, field);
  }
  bool accepts(double value) const { return is_flag() ? value == 0.0 || value == 1.0 : range.contains(value); }
  // Why `value` is not a value of this setting: "amsgrad 0.5 must be 0 or 1".
  std::string problem(double value) const {
    return is_flag() ? str(name, " ", value, " must be 0 or 1") : range.problem(name, value);
  }
  // A flag takes 1 or 0 (check first with accepts: a bool would take 0.5 as true).
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
  // left alone), each gradient read as if first multiplied by grad_factor (rounded to its
  // dtype, as clip_grad_norm scales it), the gradients themselves left as they are:
  // opt.step(grad_norm_clip(params, 1.0).factor) is clip_grad_norm(params, 1.0) then
  // opt.step(), bit for bit, with one pass over the gradients fewer (clip.hpp).
  void step(double grad_factor = 1.0);
  void zero_grad();  // forgets every parameter's gradient

  const std::string& type() const { return type_; }  // "Adam", as in error messages
  double lr() const { return group_lr(0); }          // the first group's
  void set_lr(double lr);                            // every group's
  std::size_t num_groups() const { return num_groups_; }
  double group_lr(std::size_t group) const { return group_setting(group, "lr"); }
  void set_group_lr(std::size_t group, double lr);
  // The base rates schedules compute each group's rates from (PyTorch's initial_lr),
  // kept here and in the state dict ("group.<g>.initial_lr"), so that a resumed schedule
  // runs from the saved run's base rates whatever rates the optimizer was made with. A
  // schedule sets them when it is made (each group's rate then, or those a state loaded
  // since gave); a load replaces them. Shared with the optimizer's schedule (at most one
  // at a time), which may outlive it.
  struct ScheduleBases {
    std::vector<std::optional<double>> rates;  // per group; nothing until a schedule or a state sets it
    std::vector<bool> loaded;                  // per group: from the last load, taken by no schedule yet
    bool scheduled = false;                    // a schedule lives
  };
  std::optional<double> group_initial_lr(std::size_t group) const {
    check_group(group);
    return bases_->rates[group];
  }
  const std::shared_ptr<ScheduleBases>& schedule_bases() { return bases_; }
  // Any setting of a group by name ("beta1"); flags read 1 or 0.
  virtual double group_setting(std::size_t group, const std::string& name) const = 0;
  virtual std::vector<std::string> setting_names() const = 0;  // as the optimizer's table orders them
  std::int64_t step_count() const { return steps_; }           // calls to step() so far
  const NamedParameters& parameters() const { return parameters_; }

  // "group.<g>.<setting>" for every group and setting (flags as 0/1, e.g.
  // "group.0.nesterov"), "group.<g>.initial_lr" once a schedule set it, "step", and per parameter
  // "state.<name>.<buffer>" (e.g. exp_avg) and "state.<name>.step" for the parameters that have been updated.
  // load_state_dict also reads older checkpoints, which hold only rates (see
  // upgrade_legacy_state in optimizer.cpp).
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state, bool strict = true) override;

 protected:
  // `type` names the optimizer in error messages ("Adam"); the groups' parameters are
  // checked and kept here, their settings by OptimizerWith.
  Optimizer(std::string type, const std::vector<ParamGroup>& groups);

  // Updates parameter i (whose gradient exists); `updates` counts this parameter's
  // updates including this one.
  virtual void update(std::size_t i, const Tensor& grad, std::int64_t updates) = 0;
  // Whether update() multiplies each gradient element by grad_factor() itself, as it
  // reads it (SGD's and Adam's do); otherwise step() scales a gradient in place before
  // update() reads it, when the factor is not 1.
  virtual bool applies_grad_factor() const { return false; }
  // What is wrong with a loaded buffer `name` (finite, in the parameter's shape and dtype)
  // beyond that, or nothing: Adam's second moments are means of squares, and the square
  // root of a negative one would make the parameter NaN at the next step.
  virtual std::optional<std::string> buffer_problem(const std::string& /*name*/, const Tensor& /*buffer*/) const {
    return std::nullopt;
  }
  // The buffers every update makes (Adam's moments): a strict load refuses a parameter
  // that was updated without them (they would restart from zeros under the old step
  // count's bias correction); one not strict starts that parameter afresh. Buffers a
  // setting switched on mid-run makes (SGD's momentum, amsgrad's maximum) may be missing
  // until the next update, and are not listed.
  virtual std::vector<std::string> buffers_of_every_update() const { return {}; }
  double grad_factor() const { return grad_factor_; }  // step()'s, during the step
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
  // A state's group settings, read and checked: per group of this optimizer, the
  // changes to make and the buffers its parameters may then have.
  struct LoadedGroups {
    std::vector<SettingValues> changes;
    std::vector<std::vector<std::string>> buffers;
    std::vector<std::optional<double>> initial_lrs;  // nothing where the state has none
  };
  // load_state_dict's parts: each reads its keys of `state` and adds what is wrong with
  // them to `problems`, changing nothing.
  LoadedGroups read_group_settings(const StateDict& state, bool strict, std::vector<std::string>& problems) const;
  std::vector<ParamState> read_parameter_state(const StateDict& state, const LoadedGroups& groups, bool strict,
                                               std::vector<std::string>& problems) const;

  std::string type_;
  NamedParameters parameters_;         // every group's, in order
  std::vector<std::size_t> group_of_;  // parameters_[i] belongs to group group_of_[i]
  std::size_t num_groups_;
  std::shared_ptr<ScheduleBases> bases_;
  std::vector<ParamState> state_;
  std::int64_t steps_ = 0;
  double grad_factor_ = 1.0;
};

// An optimizer whose groups each hold an Options (SGDOptions, AdamOptions): `settings`
// is its table, one row per field, "lr" among them; `check` says what is wrong with an
// Options beyond each setting's own range, for settings that constrain one another
// ("nesterov needs momentum > 0 and dampening 0 ..."; nothing when valid), or is null.
template <class Options>
class OptimizerWith : public Optimizer {
 public:
  using Check = std::vector<std::string> (*)(const Options& options);

  const Options& options() const { return options_; }  // the defaults groups start from
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
  // The table must outlive the optimizer (a constexpr array at namespace scope).
  OptimizerWith(std::string type, const std::vector<ParamGroup>& groups, const Options& options,
                std::span<const Setting<Options>> settings, Check check = nullptr);
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
  // Makes `changes` to `options`, by name (each one the table has), and says what is
  // then wrong with them: a flag given neither 1 nor 0 (left unset), a value out of its
  // setting's range, what check_ finds.
  std::vector<std::string> change(Options& options, const SettingValues& changes) const;

  std::span<const Setting<Options>> settings_;
  Check check_;
  Options options_;
  std::vector<Options> groups_;
};

template <class Options>
OptimizerWith<Options>::OptimizerWith(std::string type, const std::vector<ParamGroup>& groups, const Options& options,
                                      std::span<const Setting<Options>> settings, Check check)
    : Optimizer(std::move(type), groups), settings_(settings), check_(check), options_(options) {
  for (std::size_t i = 0; i < settings_.size(); ++i) {
    // The state dict's keys are group.<g>.<setting>, beside group.<g>.initial_lr.
    const std::string_view name = settings_[i].name;
    XGRAD_CHECK(!name.empty() && name.find('.') == std::string_view::npos && name != "initial_lr", this->type(),
                "the setting '", name, "' cannot be named so: a setting's name is not empty, has no '.', and is ",
                "not initial_lr (the schedules' base rate, group.<g>.initial_lr in the state dict)");
    for (std::size_t j = 0; j < i; ++j)
      XGRAD_CHECK(name != std::string_view(settings_[j].name), this->type(), "the setting ", name,
                  " appears twice in the table");
  }
  XGRAD_CHECK(find_setting("lr"), this->type(), "an optimizer's settings must include lr (schedules set it)");
  // The options first: every group that leaves a bad option unset would repeat it.
  const std::vector<std::string> bad_options = change(options_, {});
  if (!bad_options.empty()) fail(this->type(), listed(bad_options, "; "));
  std::vector<std::string> bad_groups;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (const auto& [name, value] : groups[g].settings)
      XGRAD_CHECK(find_setting(name), this->type(), "group ", g, " sets ", name, ", which ", this->type(),
                  " does not have (it has ", listed(setting_names()), ")");
    for (const std::string& problem : change(groups_.emplace_back(options_), groups[g].settings))
      bad_groups.push_back(str("group ", g, ": ", problem));
  }
  if (!bad_groups.empty()) fail(this->type(), listed(bad_groups, "; "));
}

template <class Options>
std::vector<std::string> OptimizerWith<Options>::change(Options& options, const SettingValues& changes) const {
  std::vector<std::string> problems;
  for (const auto& [name, value] : changes) {
    const Setting<Options>& s = setting(name);
    if (s.is_flag() && !s.accepts(value))
      problems.push_back(s.problem(value));
    else
      s.set(options, value);
  }
  for (const Setting<Options>& s : settings_)
    if (const double value = s.get(options); !s.accepts(value)) problems.push_back(s.problem(value));
  if (check_)
    for (std::string& problem : check_(options)) problems.push_back(std::move(problem));
  return problems;
}

template <class Options>
auto OptimizerWith<Options>::check_settings(std::size_t group, const SettingValues& changes) const -> SettingsCheck {
  Options changed = group_options(group);
  std::vector<std::string> problems = change(changed, changes);
  return {std::move(problems), buffer_names(changed)};
}

}  // namespace xgrad::optim
