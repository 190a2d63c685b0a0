#include "xgrad/optim/optimizer.hpp"

#include "xgrad/autograd/profile.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace xgrad::optim {

SettingValues ParamGroup::overrides() const {
  SettingValues given;
  const auto add = [&](const char* name, const auto& value) {
    if (value) given[name] = static_cast<double>(*value);  // a flag as 1 or 0
  };
  add("lr", lr);
  add("weight_decay", weight_decay);
  add("momentum", momentum);
  add("dampening", dampening);
  add("nesterov", nesterov);
  add("beta1", beta1);
  add("beta2", beta2);
  add("eps", eps);
  add("amsgrad", amsgrad);
  add("maximize", maximize);
  return given;
}

Optimizer::Optimizer(std::string type, const std::vector<ParamGroup>& groups)
    : type_(std::move(type)), num_groups_(groups.size()) {
  XGRAD_CHECK(!groups.empty(), type_, "needs at least one parameter group");
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (const auto& named : groups[g].parameters) {
      parameters_.push_back(named);
      group_of_.push_back(g);
    }
  }
  state_.resize(parameters_.size());
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
  XGRAD_CHECK(group < num_groups_, type_, "group ", group, " does not exist (", num_groups_, " groups)");
}

void Optimizer::set_lr(double lr) {
  for (std::size_t g = 0; g < num_groups_; ++g) set_group_lr(g, lr);
}

void Optimizer::set_group_lr(std::size_t group, double lr) {
  check_group(group);
  XGRAD_CHECK(lr >= 0.0 && std::isfinite(lr), type_, "learning rate ", lr, " must be finite and >= 0");
  change_settings(group, {{"lr", lr}});
}

void Optimizer::zero_grad() {
  const profile::Scope profiled(profile::Kind::optimizer, "zero_grad");
  for (auto& [name, p] : parameters_) p.zero_grad();
}

void Optimizer::step() {
  const profile::Scope profiled(profile::Kind::optimizer, "optimizer step");
  NoGradGuard no_grad;
  ++steps_;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const Tensor& param = parameters_[i].second;
    if (!param.requires_grad()) continue;  // frozen, even if it kept a gradient from before
    const Tensor grad = param.grad();
    if (!grad.defined()) continue;
    check_state(i, grad);
    update(i, grad, ++state_[i].updates);
  }
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

}  // namespace

void Optimizer::load_state_dict(const StateDict& state, bool strict) {
  std::vector<std::string> problems;
  const auto number = [&](const std::string& key, const Tensor& t, double& value) {
    if (!t.defined() || t.numel() != 1) {
      problems.push_back(key + " must hold one number");
      return false;
    }
    value = t.item();
    return true;
  };
  // Counts are stored as float64, as PyTorch does; they must be whole numbers a double
  // holds exactly.
  const auto is_count = [](double v, double least) { return v >= least && v <= 0x1p53 && v == std::floor(v); };
  double steps = 0;
  if (!state.count("step"))
    problems.push_back("missing: step");
  else if (number("step", state.at("step"), steps) && !is_count(steps, 0))
    problems.push_back(str("step ", steps, " must be a whole number in [0, 2^53]"));

  // The groups' settings. Older checkpoints hold only rates, group 0's as "lr": their
  // other settings stay as they are.
  const std::vector<std::string> names = setting_names();
  const bool legacy = state.count("lr") > 0;
  std::size_t state_groups = legacy ? 1 : 0;
  std::set<std::pair<std::size_t, std::string>> present;  // (group, setting)
  std::map<std::size_t, SettingValues> given;             // by group
  for (const auto& [key, tensor] : state) {
    std::optional<std::pair<std::size_t, std::string>> parsed = group_key(key);
    if (key == "lr") parsed = std::pair{std::size_t{0}, std::string("lr")};
    if (!parsed) continue;
    const auto& [g, name] = *parsed;
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      if (strict) problems.push_back("unexpected: " + key);
      continue;
    }
    state_groups = std::max(state_groups, g + 1);
    if (legacy && key == "group.0.lr") {
      problems.push_back("lr and group.0.lr both give group 0's rate");
      continue;
    }
    present.insert({g, name});
    double value = 0;
    if (number(key, tensor, value)) given[g][name] = value;
  }
  if (state_groups == 0)
    problems.push_back("missing: the groups' settings (group.0.lr, ...)");
  else if (strict && state_groups != num_groups_)
    problems.push_back(str("the state holds ", state_groups,
                           state_groups == 1 ? " parameter group" : " parameter groups", ", this optimizer ",
                           num_groups_));
  // Each group's settings as loaded, checked before anything changes, and the buffers
  // its parameters may have under them. Without strict, groups the state lacks keep their
  // settings and extra ones are ignored.
  std::vector<SettingValues> changes(num_groups_);
  std::vector<std::set<std::string>> known;
  for (std::size_t g = 0; g < num_groups_; ++g) {
    if (g < state_groups) {
      for (const std::string& name : names)
        if (!present.count({g, name}) && (!legacy || name == "lr"))
          problems.push_back("missing: " + (legacy && g == 0 ? std::string("lr") : str("group.", g, ".", name)));
      if (given.count(g)) changes[g] = given.at(g);
    }
    const SettingsCheck checked = check_settings(g, changes[g]);
    for (const std::string& problem : checked.problems) problems.push_back(str("group ", g, ": ", problem));
    known.emplace_back(checked.buffers.begin(), checked.buffers.end());
  }

  // Per parameter, its step count and the buffers its group's settings (as loaded) use.
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < parameters_.size(); ++i) index[parameters_[i].first] = i;
  std::vector<ParamState> loaded(parameters_.size());
  std::vector<bool> step_given(parameters_.size(), false);  // present, valid or not
  for (const auto& [key, tensor] : state) {
    if (key == "lr" || key == "step" || group_key(key)) continue;
    const std::size_t dot = key.rfind('.');
    const bool per_param = key.rfind("state.", 0) == 0 && dot != std::string::npos && dot > 6;
    const auto found = per_param ? index.find(key.substr(6, dot - 6)) : index.end();
    const std::string field = per_param ? key.substr(dot + 1) : "";
    if (found == index.end() || (field != "step" && !known[group_of_[found->second]].count(field))) {
      if (strict) problems.push_back("unexpected: " + key);
      continue;
    }
    const Tensor& param = parameters_[found->second].second;
    if (!tensor.defined()) {
      problems.push_back(key + " is undefined");
    } else if (field == "step") {
      step_given[found->second] = true;
      if (tensor.numel() != 1 || !is_count(tensor.item(), 1))
        problems.push_back(key + " must be a whole number in [1, 2^53]");
      else
        loaded[found->second].updates = static_cast<std::int64_t>(tensor.item());
    } else if (tensor.shape() != param.shape()) {
      problems.push_back(key + " expects " + shape_str(param.shape()) + ", got " + shape_str(tensor.shape()));
    } else if (!all_finite(tensor)) {
      problems.push_back(key + " holds NaN or Inf");
    } else {
      loaded[found->second].buffers[field] = tensor.to(param.dtype()).clone();
    }
  }
  for (std::size_t i = 0; i < loaded.size(); ++i) {
    const bool has_buffers = !loaded[i].buffers.empty();
    if (has_buffers && !step_given[i]) problems.push_back("missing: state." + parameters_[i].first + ".step");
  }
  if (!problems.empty()) {
    fail(type_, "load_state_dict: ", listed(problems, "; "));
  }
  for (std::size_t g = 0; g < num_groups_; ++g) change_settings(g, changes[g]);
  steps_ = static_cast<std::int64_t>(steps);
  state_ = std::move(loaded);
}

}  // namespace xgrad::optim
