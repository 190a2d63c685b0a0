#include "optim/optimizer.hpp"

#include <cmath>
#include <set>

namespace xgrad::optim {

Optimizer::Optimizer(std::string type, NamedParameters parameters, double lr)
    : type_(std::move(type)), parameters_(std::move(parameters)), state_(parameters_.size()), lr_(0) {
  std::set<std::string> names;
  for (const auto& [name, p] : parameters_) {
    XGRAD_CHECK(p.defined() && p.requires_grad() && p.is_leaf(), type_, "parameter '", name,
                "' must be a defined leaf that requires grad");
    const bool first_time = names.insert(name).second;
    XGRAD_CHECK(first_time, type_, "parameter name '", name, "' appears twice");
  }
  set_lr(lr);
}

void Optimizer::set_lr(double lr) {
  XGRAD_CHECK(lr >= 0.0 && std::isfinite(lr), type_, "learning rate ", lr, " must be finite and >= 0");
  lr_ = lr;
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
    update(i, grad, ++state_[i].updates);
  }
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
  state["lr"] = Tensor::scalar(lr_, DType::float64);
  state["step"] = Tensor::scalar(static_cast<double>(steps_), DType::float64);
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    if (state_[i].updates == 0) continue;
    const std::string prefix = "state." + parameters_[i].first + ".";
    state[prefix + "step"] = Tensor::scalar(static_cast<double>(state_[i].updates), DType::float64);
    for (const auto& [name, tensor] : state_[i].buffers) state[prefix + name] = tensor;
  }
  return state;
}

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
  const double lr = scalar("lr"), steps = scalar("step");
  if (!(lr >= 0.0) || !std::isfinite(lr)) problems.push_back(str("lr ", lr, " must be finite and >= 0"));
  if (!(steps >= 0.0)) problems.push_back("step must be >= 0");
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < parameters_.size(); ++i) index[parameters_[i].first] = i;
  const std::vector<std::string> buffer_list = buffer_names();
  const std::set<std::string> known(buffer_list.begin(), buffer_list.end());

  std::vector<ParamState> loaded(parameters_.size());
  for (const auto& [key, tensor] : state) {
    if (key == "lr" || key == "step") continue;
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
      if (tensor.numel() != 1 || tensor.item() < 1)
        problems.push_back(key + " must be a count >= 1");
      else
        loaded[found->second].updates = static_cast<std::int64_t>(tensor.item());
    } else if (tensor.shape() != param.shape()) {
      problems.push_back(key + " expects " + shape_str(param.shape()) + ", got " + shape_str(tensor.shape()));
    } else {
      loaded[found->second].buffers[field] = tensor.to(param.dtype()).clone();
    }
  }
  for (std::size_t i = 0; i < loaded.size(); ++i) {
    const bool has_buffers = !loaded[i].buffers.empty();
    if (has_buffers && loaded[i].updates == 0) problems.push_back("missing: state." + parameters_[i].first + ".step");
  }
  if (!problems.empty()) {
    std::string message = "load_state_dict:";
    for (std::size_t i = 0; i < problems.size(); ++i) message += (i ? "; " : " ") + problems[i];
    fail(type_, message);
  }
  set_lr(lr);
  steps_ = static_cast<std::int64_t>(steps);
  state_ = std::move(loaded);
}

}  // namespace xgrad::optim
