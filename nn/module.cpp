#include "nn/module.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <ostream>
#include <sstream>
#include <typeinfo>

namespace xgrad::nn {

namespace {

std::string join_name(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

// 1234567 -> "1,234,567"
std::string with_commas(std::size_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

Tensor Module::forward(const Tensor& x) {
  fail(type_name(), "forward(Tensor) is not defined for this module (input ", x.defined() ? x.shape() : Shape{},
       "); call its own forward");
}

void Module::check_new_name(const std::string& name) const {
  XGRAD_CHECK(!name.empty() && name.find('.') == std::string::npos, type_name(), "invalid name '", name,
              "' (non-empty, without '.')");
  bool taken = false;
  for (const auto& p : parameters_) taken = taken || p.first == name;
  for (const auto& b : buffers_) taken = taken || b.name == name;
  for (const auto& c : children_) taken = taken || c.first == name;
  XGRAD_CHECK(!taken, type_name(), "the name '", name, "' is already registered");
}

Tensor Module::register_parameter(const std::string& name, Tensor value) {
  check_new_name(name);
  XGRAD_CHECK(value.defined(), type_name(), "parameter '", name, "' is undefined");
  value.requires_grad_(true);
  parameters_.emplace_back(name, value);
  return value;
}

Tensor Module::register_buffer(const std::string& name, Tensor value, bool persistent) {
  check_new_name(name);
  XGRAD_CHECK(value.defined(), type_name(), "buffer '", name, "' is undefined");
  buffers_.push_back({name, value, persistent});
  return value;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name);
  XGRAD_CHECK(module, type_name(), "submodule '", name, "' is null");
  children_.emplace_back(name, std::move(module));
}

void Module::collect_parameters(const std::string& prefix, NamedTensors& out) const {
  for (const auto& [name, tensor] : parameters_) out.emplace_back(join_name(prefix, name), tensor);
  for (const auto& [name, child] : children_) child->collect_parameters(join_name(prefix, name), out);
}

void Module::collect_buffers(const std::string& prefix, bool persistent_only, NamedTensors& out) const {
  for (const Buffer& b : buffers_)
    if (b.persistent || !persistent_only) out.emplace_back(join_name(prefix, b.name), b.value);
  for (const auto& [name, child] : children_) child->collect_buffers(join_name(prefix, name), persistent_only, out);
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect_parameters("", out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, tensor] : named_parameters()) out.push_back(tensor);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  collect_buffers("", false, out);
  return out;
}

std::size_t Module::num_parameters() const {
  std::size_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return n;
}

Module& Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
  return *this;
}

Module& Module::to(DType dtype) {
  NoGradGuard no_grad;
  const auto convert = [dtype](Tensor& t) {
    if (t.dtype() != dtype) t.set_data(t.to(dtype));
  };
  for (auto& [name, tensor] : parameters_) convert(tensor);
  for (Buffer& b : buffers_) convert(b.value);
  for (auto& [name, child] : children_) child->to(dtype);
  return *this;
}

void Module::zero_grad() {
  for (Tensor& p : parameters()) p.zero_grad();
}

StateDict Module::state_dict() const {
  StateDict state;
  NamedTensors entries = named_parameters();
  collect_buffers("", true, entries);
  for (auto& [name, tensor] : entries) state.emplace(name, tensor);
  return state;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  const StateDict own = state_dict();
  std::vector<std::string> missing, unexpected, mismatched;
  for (const auto& [name, tensor] : own) {
    const auto it = state.find(name);
    if (it == state.end()) {
      missing.push_back(name);
    } else if (!it->second.defined() || it->second.shape() != tensor.shape()) {
      mismatched.push_back(name + " expects " + shape_str(tensor.shape()) + ", got " +
                           (it->second.defined() ? shape_str(it->second.shape()) : "an undefined tensor"));
    }
  }
  for (const auto& [name, tensor] : state)
    if (!own.count(name)) unexpected.push_back(name);
  if (!strict) missing.clear(), unexpected.clear();
  if (!missing.empty() || !unexpected.empty() || !mismatched.empty()) {
    std::string message = "load_state_dict:";
    const auto list = [&message](const char* what, const std::vector<std::string>& names) {
      if (names.empty()) return;
      message += std::string(" ") + what + ":";
      for (std::size_t i = 0; i < names.size(); ++i) message += (i ? ", " : " ") + names[i];
      message += ";";
    };
    list("missing", missing);
    list("unexpected", unexpected);
    list("shape mismatch", mismatched);
    message.pop_back();
    fail(type_name(), message);
  }
  NoGradGuard no_grad;
  for (auto& [name, tensor] : own) {
    const auto it = state.find(name);
    if (it == state.end()) continue;
    Tensor destination = tensor;
    destination.set_data(it->second.to(tensor.dtype()));
  }
}

std::string Module::type_name() const {
  const char* mangled = typeid(*this).name();
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : mangled;
  std::free(demangled);
  const std::size_t colon = name.rfind("::");
  return colon == std::string::npos ? name : name.substr(colon + 2);
}

void Module::print_tree(std::ostream& os, const std::string& label, int depth) const {
  os << std::string(2 * static_cast<std::size_t>(depth), ' ');
  if (!label.empty()) os << '(' << label << "): ";
  os << type_name() << '(' << extra_repr() << ')';
  if (const std::size_t n = num_parameters()) os << "  # " << with_commas(n) << " parameters";
  os << '\n';
  for (const auto& [name, child] : children_) child->print_tree(os, name, depth + 1);
}

std::string Module::to_string() const {
  std::ostringstream os;
  print_tree(os, "", 0);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Module& module) { return os << module.to_string(); }

}  // namespace xgrad::nn
