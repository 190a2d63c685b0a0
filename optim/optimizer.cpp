#include "xgrad/optim/optimizer.hpp"

#include "xgrad/autograd/profile.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace xgrad::optim {

namespace {

// The settings a group gives, by name (flags as 1 or 0; unset ones empty).
std::vector<std::pair<const char*, std::optional<double>>> given_settings(const ParamGroup& g) {
  const auto flag = [](const std::optional<bool>& b) {
    return b ? std::optional<double>(*b ? 1.0 : 0.0) : std::nullopt;
  };
  return {{"lr", g.lr},
          {"weight_decay", g.weight_decay},
          {"momentum", g.momentum},
          {"dampening", g.dampening},
          {"nesterov", flag(g.nesterov)},
          {"beta1", g.beta1},
          {"beta2", g.beta2},
          {"eps", g.eps},
          {"amsgrad", flag(g.amsgrad)},
          {"maximize", flag(g.maximize)}};
}

}  // namespace

Optimizer::Optimizer(std::string type, std::vector<ParamGroup> groups, std::vector<Setting> settings, Check check)
    : type_(std::move(type)), settings_(std::move(settings)), check_(check) {
  XGRAD_CHECK(settings_.size() >= 2 && settings_[kLr].name == "lr" && settings_[kWeightDecay].name == "weight_decay",
              type_, "an optimizer's settings must start with lr and weight_decay");
  XGRAD_CHECK(!groups.empty(), type_, "needs at least one parameter group");
  std::vector<double> defaults;
  for (const Setting& s : settings_) defaults.push_back(s.value);
  // The options first: every group that leaves a bad option unset would repeat it.
  const std::vector<std::string> bad_options = invalid(defaults);
  if (!bad_options.empty()) fail(type_, listed(bad_options, "; "));
  std::vector<std::string> bad_groups;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    std::vector<double> values = defaults;
    for (const auto& setting : given_settings(groups[g])) {
      const std::string& name = setting.first;  // (not a structured binding: clang 14 cannot capture one)
      const auto& value = setting.second;
      if (!value) continue;
      const auto it =
          std::find_if(settings_.begin(), settings_.end(), [&](const Setting& s) { return s.name == name; });
      XGRAD_CHECK(it != settings_.end(), type_, "group ", g, " sets ", name, ", which ", type_, " does not have");
      values[it - settings_.begin()] = *value;
    }
    for (const std::string& problem : invalid(values)) bad_groups.push_back(str("group ", g, ": ", problem));
    groups_.push_back(std::move(values));
    for (auto& named : groups[g].parameters) {
      parameters_.push_back(std::move(named));
      group_of_.push_back(g);
    }
  }
  if (!bad_groups.empty()) fail(type_, listed(bad_groups, "; "));
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

std::vector<std::string> Optimizer::invalid(const std::vector<double>& v) const {
  std::vector<std::string> found;
  if (!(v[kLr] >= 0.0) || !std::isfinite(v[kLr]))
    found.push_back(str("learning rate ", v[kLr], " must be finite and >= 0"));
  if (!(v[kWeightDecay] >= 0.0) || !std::isfinite(v[kWeightDecay]))
    found.push_back(str("weight_decay ", v[kWeightDecay], " must be finite and >= 0"));
  for (std::size_t s = 0; s < settings_.size(); ++s)
    if (settings_[s].flag && v[s] != 0.0 && v[s] != 1.0)
      found.push_back(str(settings_[s].name, " ", v[s], " must be 0 or 1"));
  for (std::string& problem : check_(v)) found.push_back(std::move(problem));
  return found;
}

const std::vector<double>& Optimizer::group_settings(std::size_t group) const {
  XGRAD_CHECK(group < groups_.size(), type_, "group ", group, " does not exist (", groups_.size(), " groups)");
  return groups_[group];
}

double Optimizer::group_setting(std::size_t group, const std::string& name) const {
  const std::vector<double>& values = group_settings(group);
  for (std::size_t s = 0; s < settings_.size(); ++s)
    if (settings_[s].name == name) return values[s];
  fail(type_, "has no setting '", name, "' (it has ", listed(setting_names()), ")");
}

std::vector<std::string> Optimizer::setting_names() const {
  std::vector<std::string> names;
  for (const Setting& s : settings_) names.push_back(s.name);
  return names;
}

void Optimizer::set_lr(double lr) {
  for (std::size_t g = 0; g < groups_.size(); ++g) set_group_lr(g, lr);
}

void Optimizer::set_group_lr(std::size_t group, double lr) {
  XGRAD_CHECK(group < groups_.size(), type_, "group ", group, " does not exist (", groups_.size(), " groups)");
  XGRAD_CHECK(lr >= 0.0 && std::isfinite(lr), type_, "learning rate ", lr, " must be finite and >= 0");
  groups_[group][kLr] = lr;
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
  for (std::size_t g = 0; g < groups_.size(); ++g)
    for (std::size_t s = 0; s < settings_.size(); ++s)
      state[str("group.", g, ".", settings_[s].name)] = Tensor::scalar(groups_[g][s], DType::float64);
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
  const bool legacy = state.count("lr") > 0;
  std::size_t state_groups = legacy ? 1 : 0;
  std::set<std::pair<std::size_t, std::size_t>> present;  // (group, setting)
  std::map<std::pair<std::size_t, std::size_t>, double> given;
  for (const auto& [key, tensor] : state) {
    std::optional<std::pair<std::size_t, std::string>> parsed = group_key(key);
    if (key == "lr") parsed = std::pair{std::size_t{0}, std::string("lr")};
    if (!parsed) continue;
    const std::size_t g = parsed->first;  // (not a structured binding: clang 14 cannot capture one)
    const std::string& name = parsed->second;
    const auto it = std::find_if(settings_.begin(), settings_.end(), [&](const Setting& s) { return s.name == name; });
    if (it == settings_.end()) {
      if (strict) problems.push_back("unexpected: " + key);
      continue;
    }
    const std::size_t s = it - settings_.begin();
    state_groups = std::max(state_groups, g + 1);
    if (legacy && key == "group.0.lr") {
      problems.push_back("lr and group.0.lr both give group 0's rate");
      continue;
    }
    present.insert({g, s});
    double value = 0;
    if (number(key, tensor, value)) given[{g, s}] = value;
  }
  if (state_groups == 0)
    problems.push_back("missing: the groups' settings (group.0.lr, ...)");
  else if (strict && state_groups != groups_.size())
    problems.push_back(str("the state holds ", state_groups,
                           state_groups == 1 ? " parameter group" : " parameter groups", ", this optimizer ",
                           groups_.size()));
  // Without strict, groups the state lacks keep their settings and extra ones are ignored.
  std::vector<std::vector<double>> groups = groups_;
  for (std::size_t g = 0; g < std::min(state_groups, groups.size()); ++g) {
    for (std::size_t s = 0; s < settings_.size(); ++s) {
      if (given.count({g, s})) groups[g][s] = given.at({g, s});
      if (!present.count({g, s}) && (!legacy || s == kLr))
        problems.push_back("missing: " +
                           (legacy && g == 0 ? std::string("lr") : str("group.", g, ".", settings_[s].name)));
    }
    for (const std::string& problem : invalid(groups[g])) problems.push_back(str("group ", g, ": ", problem));
  }

  // Per parameter, the buffers its group's settings (as loaded) use.
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < parameters_.size(); ++i) index[parameters_[i].first] = i;
  std::vector<std::set<std::string>> known;
  for (const auto& values : groups) {
    const std::vector<std::string> names = buffer_names(values);
    known.emplace_back(names.begin(), names.end());
  }
  std::vector<ParamState> loaded(parameters_.size());
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
    if (has_buffers && loaded[i].updates == 0) problems.push_back("missing: state." + parameters_[i].first + ".step");
  }
  if (!problems.empty()) {
    fail(type_, "load_state_dict: ", listed(problems, "; "));
  }
  groups_ = std::move(groups);
  steps_ = static_cast<std::int64_t>(steps);
  state_ = std::move(loaded);
}

}  // namespace xgrad::optim
