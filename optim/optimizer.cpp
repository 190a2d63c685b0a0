#include "xgrad/optim/optimizer.hpp"

#include <cmath>
#include <map>
#include <set>

namespace xgrad::optim {

Optimizer::Optimizer(std::string type, std::vector<ParamGroup> groups, double lr, double weight_decay)
    : type_(std::move(type)) {
  XGRAD_CHECK(!groups.empty(), type_, "needs at least one parameter group");
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const double group_decay = groups[g].weight_decay.value_or(weight_decay);
    XGRAD_CHECK(group_decay >= 0.0 && std::isfinite(group_decay), type_, "group ", g, ": weight_decay ", group_decay,
                " must be finite and >= 0");
    groups_.push_back({0.0, group_decay});
    for (auto& named : groups[g].parameters) {
      parameters_.push_back(std::move(named));
      group_of_.push_back(g);
    }
  }
  state_.resize(parameters_.size());
  std::set<std::string> names;
  std::map<const void*, std::string> tensors;  // each parameter's node, to catch one tensor given twice
  for (const auto& [name, p] : parameters_) {
    XGRAD_CHECK(p.defined() && p.requires_grad() && p.is_leaf(), type_, "parameter '", name,
                "' must be a defined leaf that requires grad");
    const bool first_time = names.insert(name).second;
    XGRAD_CHECK(first_time, type_, "parameter name '", name, "' appears twice");
    const auto [it, new_tensor] = tensors.emplace(p.node().get(), name);
    XGRAD_CHECK(new_tensor, type_, "parameters '", it->second, "' and '", name,
                "' are the same tensor (it would be updated twice per step)");
  }
  for (std::size_t g = 0; g < groups.size(); ++g) set_group_lr(g, groups[g].lr.value_or(lr));
}

void Optimizer::set_lr(double lr) {
  for (std::size_t g = 0; g < groups_.size(); ++g) set_group_lr(g, lr);
}

void Optimizer::set_group_lr(std::size_t group, double lr) {
  XGRAD_CHECK(group < groups_.size(), type_, "group ", group, " does not exist (", groups_.size(), " groups)");
  XGRAD_CHECK(lr >= 0.0 && std::isfinite(lr), type_, "learning rate ", lr, " must be finite and >= 0");
  groups_[group].lr = lr;
}

void Optimizer::zero_grad() {
  for (auto& [name, p] : parameters_) p.zero_grad();
}

void Optimizer::step() {
  NoGradGuard no_grad;
  ++steps_;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const Tensor grad = parameters_[i].second.grad();
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
  state["lr"] = Tensor::scalar(groups_[0].lr, DType::float64);
  for (std::size_t g = 1; g < groups_.size(); ++g)
    state[str("group.", g, ".lr")] = Tensor::scalar(groups_[g].lr, DType::float64);
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

}  // namespace

void Optimizer::load_state_dict(const StateDict& state, bool strict) {
  std::vector<std::string> problems;
  const auto scalar = [&](const std::string& key) -> double {
    const auto it = state.find(key);
    if (it == state.end()) {
      problems.push_back("missing: " + key);
      return 0;
    }
    if (!it->second.defined() || it->second.numel() != 1) {
      problems.push_back(key + " must hold one number");
      return 0;
    }
    return it->second.item();
  };
  // Counts are stored as float64, as PyTorch does; they must be whole numbers a double
  // holds exactly.
  const auto is_count = [](double v, double least) { return v >= least && v <= 0x1p53 && v == std::floor(v); };
  std::vector<double> lrs{scalar("lr")};
  for (std::size_t g = 1; g < groups_.size(); ++g) lrs.push_back(scalar(str("group.", g, ".lr")));
  const double steps = scalar("step");
  for (const double lr : lrs)
    if (!(lr >= 0.0) || !std::isfinite(lr)) problems.push_back(str("lr ", lr, " must be finite and >= 0"));
  if (!is_count(steps, 0)) problems.push_back(str("step ", steps, " must be a whole number in [0, 2^53]"));
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < parameters_.size(); ++i) index[parameters_[i].first] = i;
  const std::vector<std::string> buffer_list = buffer_names();
  const std::set<std::string> known(buffer_list.begin(), buffer_list.end());

  std::vector<ParamState> loaded(parameters_.size());
  for (const auto& [key, tensor] : state) {
    if (key == "lr" || key == "step") continue;
    const bool group_lr = key.rfind("group.", 0) == 0 && key.size() > 9 && key.substr(key.size() - 3) == ".lr";
    if (group_lr) {
      const std::string index = key.substr(6, key.size() - 9);
      const bool known_group = !index.empty() && index.find_first_not_of("0123456789") == std::string::npos &&
                               index.size() < 6 && std::stoul(index) >= 1 && std::stoul(index) < groups_.size();
      if (!known_group && strict) problems.push_back("unexpected: " + key);
      continue;
    }
    const std::size_t dot = key.rfind('.');
    const bool per_param = key.rfind("state.", 0) == 0 && dot != std::string::npos && dot > 6;
    const auto found = per_param ? index.find(key.substr(6, dot - 6)) : index.end();
    const std::string field = per_param ? key.substr(dot + 1) : "";
    if (found == index.end() || (field != "step" && !known.count(field))) {
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
  for (std::size_t g = 0; g < groups_.size(); ++g) groups_[g].lr = lrs[g];
  steps_ = static_cast<std::int64_t>(steps);
  state_ = std::move(loaded);
}

}  // namespace xgrad::optim
