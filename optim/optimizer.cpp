#include "xgrad/optim/optimizer.hpp"

#include "xgrad/autograd/denormals.hpp"
#include "xgrad/autograd/profile.hpp"
#include "xgrad/optim/clip.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace xgrad::optim {

namespace {

// A bound as written in ranges: "0", "1", "0.5" (messages print values as "1.0").
std::string bound_str(double bound) {
  std::ostringstream text;
  text << bound;
  return text.str();
}

}  // namespace

std::string Range::problem(std::string_view name, double value) const {
  // "lr" is every optimizer's: errors say what it is.
  const std::string_view what = name == "lr" ? std::string_view("learning rate") : name;
  const bool has_min = std::isfinite(min), has_max = std::isfinite(max);
  const std::string upper = has_max ? bound_str(max) + (max_excluded ? ")" : "]") : "";
  if (has_min && has_max) return str(what, " ", value, " must lie in [", bound_str(min), ", ", upper);
  if (has_min) return str(what, " ", value, " must be finite and >= ", bound_str(min));
  if (has_max) return str(what, " ", value, " must be finite and ", max_excluded ? "< " : "<= ", bound_str(max));
  return str(what, " ", value, " must be finite");
}

namespace {
constexpr const char* kInitialLr = "initial_lr";  // not a setting: the schedules' base rate
}  // namespace

Optimizer::Optimizer(std::string type, const std::vector<ParamGroup>& groups)
    : type_(std::move(type)), num_groups_(groups.size()) {
  XGRAD_CHECK(!groups.empty(), type_, "needs at least one parameter group");
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (const auto& named : groups[g].parameters) {
      parameters_.push_back(named);
      group_of_.push_back(g);
    }
  }
  // As PyTorch: an optimizer of nothing (a model frozen whole, a filter that kept
  // nothing) would step without a word.
  XGRAD_CHECK(!parameters_.empty(), type_, "got an empty parameter list (", groups.size(),
              groups.size() == 1 ? " group" : " groups", ", no parameter)");
  state_.resize(parameters_.size());
  bases_ = std::make_shared<ScheduleBases>();
  bases_->rates.resize(num_groups_);
  bases_->loaded.resize(num_groups_);
  std::set<std::string> names;
  std::map<const void*, std::string> tensors;  // each parameter's node, to catch one tensor given twice
  for (const auto& [name, p] : parameters_) {
    XGRAD_CHECK(p.defined(), type_, "parameter '", name, "' is undefined");
    // An op's output: updating it would not reach the leaves it was computed from.
    // Leaves that do not require grad are frozen parameters, kept but not updated.
    XGRAD_CHECK(p.is_leaf(), type_, "parameter '", name, "' must be a leaf, not the output of an op");
    const bool first_time = names.insert(name).second;
    XGRAD_CHECK(first_time, type_, "parameter name '", name, "' appears twice");
    const auto [it, new_tensor] = tensors.emplace(p.node().get(), name);
    XGRAD_CHECK(new_tensor, type_, "parameters '", it->second, "' and '", name,
                "' are the same tensor (it would be updated twice per step)");
  }
}

void Optimizer::check_group(std::size_t group) const {
  XGRAD_CHECK(group < num_groups_, type_, "group ", group, " does not exist (", num_groups_,
              num_groups_ == 1 ? " group)" : " groups)");
}

void Optimizer::set_lr(double lr) {
  for (std::size_t g = 0; g < num_groups_; ++g) set_group_lr(g, lr);
}

void Optimizer::set_group_lr(std::size_t group, double lr) {
  check_group(group);
  const SettingValues change = {{"lr", lr}};
  const SettingsCheck checked = check_settings(group, change);
  if (!checked.problems.empty()) fail(type_, listed(checked.problems, "; "));
  change_settings(group, change);
}

void Optimizer::zero_grad() {
  const profile::Scope profiled(profile::Kind::optimizer, "zero_grad");
  for (auto& [name, p] : parameters_) p.zero_grad();
}

void Optimizer::step(double grad_factor) {
  const profile::Scope profiled(profile::Kind::optimizer, "optimizer step");
  // A clip's factor lies in [0, 1], or is NaN from a non-finite norm (passed on, as
  // PyTorch's clipping does); a negative one would climb the gradient without a word.
  XGRAD_CHECK(!(grad_factor < 0.0) && !std::isinf(grad_factor), type_, "step: grad_factor ", grad_factor,
              " must be finite and >= 0");
  NoGradGuard no_grad;
  ++steps_;
  grad_factor_ = grad_factor;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const Tensor& param = parameters_[i].second;
    if (!param.requires_grad()) continue;  // frozen, even if it kept a gradient from before
    const Tensor grad = param.grad();
    if (!grad.defined()) continue;
    check_state(i, grad);
    const DenormalModeGuard mode(param.dtype());  // float32's denormals flushed, as in the ops
    if (grad_factor != 1.0 && !applies_grad_factor()) scale_grads({param}, grad_factor);
    update(i, grad, ++state_[i].updates);
  }
  grad_factor_ = 1.0;
}

// A parameter may be given new data (Tensor::set_data, Module::to) after its state was
// made: updating with buffers of the old shape or dtype would write out of bounds.
void Optimizer::check_state(std::size_t i, const Tensor& grad) const {
  const auto& [name, param] = parameters_[i];
  XGRAD_CHECK(grad.shape() == param.shape() && grad.dtype() == param.dtype(), type_, "parameter '", name, "' is ",
              param.dtype(), " ", param.shape(), " but its gradient is ", grad.dtype(), " ", grad.shape());
  for (const auto& [buffer, tensor] : state_[i].buffers)
    XGRAD_CHECK(tensor.shape() == param.shape() && tensor.dtype() == param.dtype(), type_, "parameter '", name,
                "' is now ", param.dtype(), " ", param.shape(), " but its state '", buffer, "' is ", tensor.dtype(),
                " ", tensor.shape(), "; it changed after the optimizer made its state (make a new optimizer)");
}

Tensor& Optimizer::buffer(std::size_t i, const std::string& name, bool* created) {
  auto& buffers = state_[i].buffers;
  auto it = buffers.find(name);
  if (created) *created = it == buffers.end();
  if (it == buffers.end()) {
    // The state dict's keys are state.<parameter>.<buffer>, beside state.<parameter>.step.
    XGRAD_CHECK(!name.empty() && name.find('.') == std::string::npos && name != "step", type_, "buffer '", name,
                "' of parameter '", parameters_[i].first, "' cannot be named so: a buffer's name is not empty, has ",
                "no '.', and is not step (the parameter's update count in the state dict)");
    // Only the buffers the group declares are saved and loaded alike: one it does not
    // declare would make a checkpoint its own load_state_dict refuses.
    const std::vector<std::string> declared = check_settings(group_of_[i], {}).buffers;
    XGRAD_CHECK(std::find(declared.begin(), declared.end(), name) != declared.end(), type_, "buffer '", name,
                "' of parameter '", parameters_[i].first,
                "' is not among the buffers its group's settings declare (buffer_names: ",
                declared.empty() ? std::string("none") : listed(declared),
                "); a checkpoint holding it could not be loaded");
    const Tensor& p = parameters_[i].second;
    it = buffers.emplace(name, Tensor::zeros(p.shape(), p.dtype())).first;
  }
  return it->second;
}

StateDict Optimizer::state_dict() const {
  StateDict state;
  const std::vector<std::string> names = setting_names();
  for (std::size_t g = 0; g < num_groups_; ++g)
    for (const std::string& name : names)
      state[str("group.", g, ".", name)] = Tensor::scalar(group_setting(g, name), DType::float64);
  for (std::size_t g = 0; g < num_groups_; ++g)
    if (const std::optional<double> rate = bases_->rates[g])
      state[str("group.", g, ".", kInitialLr)] = Tensor::scalar(*rate, DType::float64);
  state["step"] = Tensor::scalar(static_cast<double>(steps_), DType::float64);
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    if (state_[i].updates == 0) continue;
    const std::string prefix = "state." + parameters_[i].first + ".";
    state[prefix + "step"] = Tensor::scalar(static_cast<double>(state_[i].updates), DType::float64);
    for (const auto& [name, tensor] : state_[i].buffers) state[prefix + name] = tensor;
  }
  return state;
}

namespace {

bool all_finite(const Tensor& t) {
  for (double v : t.to_vector())
    if (!std::isfinite(v)) return false;
  return true;
}

// Counts are stored as float64, as PyTorch does; they must be whole numbers a double
// holds exactly.
bool is_count(double v, double least) { return v >= least && v <= 0x1p53 && v == std::floor(v); }

// The value of `key`'s one-number tensor, or nothing (and a problem).
std::optional<double> one_number(const std::string& key, const Tensor& t, std::vector<std::string>& problems) {
  if (t.defined() && t.numel() == 1) return t.item();
  problems.push_back(key + " must hold one number");
  return std::nullopt;
}

// g from "group.<g>.<setting>" (a number without leading zeros), and the setting.
std::optional<std::pair<std::size_t, std::string>> group_key(const std::string& key) {
  if (key.rfind("group.", 0) != 0) return std::nullopt;
  const std::size_t dot = key.find('.', 6);
  if (dot == std::string::npos) return std::nullopt;
  const std::string index = key.substr(6, dot - 6);
  const bool number = !index.empty() && index.size() < 7 &&
                      index.find_first_not_of("0123456789") == std::string::npos && (index == "0" || index[0] != '0');
  if (!number) return std::nullopt;
  return std::pair{static_cast<std::size_t>(std::stoul(index)), key.substr(dot + 1)};
}

// Before optimizers kept every setting of every group, their states held only the
// rates: "lr" (group 0's) and "group.<g>.lr" (the others'). Such a state, in today's
// layout: "lr" becomes "group.0.lr", and each of its groups that `current` has takes
// the settings the state lacks from `current` as it is, so that they stay as the
// optimizer was made. A state without "lr" is today's, returned as it is.
StateDict upgrade_legacy_state(const StateDict& state, const Optimizer& current) {
  if (!state.count("lr")) return state;
  XGRAD_CHECK(!state.count("group.0.lr"), current.type(),
              "load_state_dict: lr and group.0.lr both give group 0's rate");
  StateDict upgraded = state;
  upgraded["group.0.lr"] = upgraded.at("lr");
  upgraded.erase("lr");
  std::size_t groups = 1;
  for (const auto& [key, tensor] : upgraded)
    if (const auto parsed = group_key(key); parsed && parsed->second == "lr")
      groups = std::max(groups, parsed->first + 1);
  for (std::size_t g = 0; g < std::min(groups, current.num_groups()); ++g)
    for (const std::string& name : current.setting_names())
      if (name != "lr")  // a missing rate stays missing
        upgraded.emplace(str("group.", g, ".", name), Tensor::scalar(current.group_setting(g, name), DType::float64));
  return upgraded;
}

}  // namespace

// Everything is read and checked first; the optimizer changes only when nothing is wrong.
void Optimizer::load_state_dict(const StateDict& given, bool strict) {
  const StateDict state = upgrade_legacy_state(given, *this);
  std::vector<std::string> problems;
  std::optional<double> steps;
  if (!state.count("step"))
    problems.push_back("missing: step");
  else
    steps = one_number("step", state.at("step"), problems);
  if (steps && !is_count(*steps, 0)) problems.push_back(str("step ", *steps, " must be a whole number in [0, 2^53]"));
  const LoadedGroups groups = read_group_settings(state, strict, problems);
  std::vector<ParamState> loaded = read_parameter_state(state, groups, strict, problems);
  if (!problems.empty()) fail(type_, "load_state_dict: ", listed(problems, "; "));

  for (std::size_t g = 0; g < num_groups_; ++g) {
    change_settings(g, groups.changes[g]);
    bases_->loaded[g] = groups.initial_lrs[g].has_value();
    if (groups.initial_lrs[g]) bases_->rates[g] = groups.initial_lrs[g];
  }
  steps_ = static_cast<std::int64_t>(*steps);
  state_ = std::move(loaded);
}

// "group.<g>.<setting>": every setting of each group the state has, checked as the
// options are. Without strict, groups the state lacks keep their settings and extra
// ones are ignored.
auto Optimizer::read_group_settings(const StateDict& state, bool strict, std::vector<std::string>& problems) const
    -> LoadedGroups {
  const std::vector<std::string> names = setting_names();
  std::map<std::size_t, std::set<std::string>> present;  // by group, valid or not
  std::map<std::size_t, SettingValues> given;            // by group, those that hold a number
  LoadedGroups loaded;
  loaded.initial_lrs.resize(num_groups_);
  for (const auto& [key, tensor] : state) {
    const auto parsed = group_key(key);
    if (!parsed) continue;
    const auto& [g, name] = *parsed;
    if (name == kInitialLr && g < num_groups_) {
      const std::optional<double> value = one_number(key, tensor, problems);
      if (value && !(std::isfinite(*value) && *value >= 0.0))
        problems.push_back(str(key, " ", *value, " must be finite and >= 0"));
      else
        loaded.initial_lrs[g] = value;
      continue;
    }
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      if (strict) problems.push_back("unexpected: " + key);
      continue;
    }
    present[g].insert(name);
    if (const std::optional<double> value = one_number(key, tensor, problems)) given[g][name] = *value;
  }
  const std::size_t state_groups = present.empty() ? 0 : present.rbegin()->first + 1;
  if (state_groups == 0)
    problems.push_back("missing: the groups' settings (group.0.lr, ...)");
  else if (strict && state_groups != num_groups_)
    problems.push_back(str("the state holds ", state_groups,
                           state_groups == 1 ? " parameter group" : " parameter groups", ", this optimizer ",
                           num_groups_));
  for (std::size_t g = 0; g < num_groups_; ++g) {
    SettingValues& changes = loaded.changes.emplace_back();
    if (g < state_groups) {
      for (const std::string& name : names)
        if (!present[g].count(name)) problems.push_back(str("missing: group.", g, ".", name));
      changes = given[g];
    }
    SettingsCheck checked = check_settings(g, changes);
    for (const std::string& problem : checked.problems) problems.push_back(str("group ", g, ": ", problem));
    loaded.buffers.push_back(std::move(checked.buffers));
  }
  return loaded;
}

// "state.<name>.step" and "state.<name>.<buffer>": per parameter, its update count and
// the buffers its group's settings (as loaded) use.
auto Optimizer::read_parameter_state(const StateDict& state, const LoadedGroups& groups, bool strict,
                                     std::vector<std::string>& problems) const -> std::vector<ParamState> {
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < parameters_.size(); ++i) index[parameters_[i].first] = i;
  std::vector<ParamState> loaded(parameters_.size());
  std::vector<bool> step_given(parameters_.size(), false);  // present, valid or not
  for (const auto& [key, tensor] : state) {
    if (key == "step" || group_key(key)) continue;
    const std::size_t dot = key.rfind('.');
    const bool per_param = key.rfind("state.", 0) == 0 && dot != std::string::npos && dot > 6;
    const auto found = per_param ? index.find(key.substr(6, dot - 6)) : index.end();
    const std::string field = per_param ? key.substr(dot + 1) : "";
    const auto uses = [&](std::size_t i) {
      const std::vector<std::string>& buffers = groups.buffers[group_of_[i]];
      return std::find(buffers.begin(), buffers.end(), field) != buffers.end();
    };
    if (found == index.end() || (field != "step" && !uses(found->second))) {
      if (strict) problems.push_back("unexpected: " + key);
      continue;
    }
    const std::size_t i = found->second;
    const Tensor& param = parameters_[i].second;
    if (!tensor.defined()) {
      problems.push_back(key + " is undefined");
    } else if (field == "step") {
      step_given[i] = true;
      if (tensor.numel() != 1 || !is_count(tensor.item(), 1))
        problems.push_back(key + " must be a whole number in [1, 2^53]");
      else
        loaded[i].updates = static_cast<std::int64_t>(tensor.item());
    } else if (tensor.shape() != param.shape()) {
      problems.push_back(key + " expects " + shape_str(param.shape()) + ", got " + shape_str(tensor.shape()));
    } else {
      // Checked as the parameter will hold it: 1e300 in float64 is Inf in float32.
      Tensor buffer = tensor.to(param.dtype()).clone();
      if (!all_finite(buffer))
        problems.push_back(key +
                           (all_finite(tensor) ? str(" overflows ", dtype_name(param.dtype())) : " holds NaN or Inf"));
      else if (const std::optional<std::string> problem = buffer_problem(field, buffer))
        problems.push_back(key + " " + *problem);
      else
        loaded[i].buffers[field] = std::move(buffer);
    }
  }
  for (std::size_t i = 0; i < loaded.size(); ++i) {
    const std::string prefix = "state." + parameters_[i].first + ".";
    if (!loaded[i].buffers.empty() && !step_given[i]) problems.push_back("missing: " + prefix + "step");
    if (!step_given[i]) continue;
    for (const std::string& name : buffers_of_every_update()) {
      if (state.count(prefix + name)) continue;
      // Not strict: the parameter starts afresh, its step count with its buffers, so that
      // zeros are not read under the old count's bias correction.
      if (strict)
        problems.push_back("missing: " + prefix + name);
      else
        loaded[i] = ParamState{};
    }
  }
  return loaded;
}

}  // namespace xgrad::optim
