#include "xgrad/nn/module.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <ostream>
#include <sstream>
#include <typeinfo>
#include <unordered_set>

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

void Module::remove_module(const std::string& name) {
  const auto it = std::find_if(children_.begin(), children_.end(), [&](const auto& c) { return c.first == name; });
  XGRAD_CHECK(it != children_.end(), type_name(), "has no submodule '", name, "' to remove");
  children_.erase(it);
}

template <class F>
void Module::walk(F&& f) const {
  struct Pending {
    const Module* module;
    const std::string* name;  // null for the root
    std::size_t depth;
  };
  std::vector<Pending> stack{{this, nullptr, 0}};
  std::vector<const Module*> ancestors;  // from the root to the module being visited
  std::unordered_set<const Module*> on_path;
  std::string path;                       // the visited module's dotted path
  std::vector<std::size_t> path_lengths;  // path's length at each depth
  while (!stack.empty()) {
    const Pending next = stack.back();
    stack.pop_back();
    while (ancestors.size() > next.depth) {
      on_path.erase(ancestors.back());
      ancestors.pop_back();
      path_lengths.pop_back();
    }
    path.resize(path_lengths.empty() ? 0 : path_lengths.back());
    if (next.name) path += (path.empty() ? "" : ".") + *next.name;
    XGRAD_CHECK(on_path.insert(next.module).second, type_name(), "module '", path, "' contains itself");
    ancestors.push_back(next.module);
    path_lengths.push_back(path.size());
    f(*next.module, path, next.depth);
    const auto& children = next.module->children_;
    for (auto it = children.rbegin(); it != children.rend(); ++it)
      stack.push_back({it->second.get(), &it->first, next.depth + 1});
  }
}

Module::~Module() {
  // Destroying a deep chain of children recursively would overflow the stack: a child
  // held only here gives up its own children to this loop before it dies.
  std::vector<std::shared_ptr<Module>> pending;
  for (auto& [name, child] : children_) pending.push_back(std::move(child));
  while (!pending.empty()) {
    std::shared_ptr<Module> module = std::move(pending.back());
    pending.pop_back();
    if (module.use_count() != 1) continue;
    for (auto& [name, child] : module->children_) pending.push_back(std::move(child));
    module->children_.clear();
  }
}

NamedTensors Module::collect_buffers(bool persistent_only) const {
  NamedTensors out;
  walk([&](const Module& m, const std::string& path, std::size_t) {
    for (const Buffer& b : m.buffers_)
      if (b.persistent || !persistent_only) out.emplace_back(join_name(path, b.name), b.value);
  });
  return out;
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  walk([&](const Module& m, const std::string& path, std::size_t) {
    for (const auto& [name, tensor] : m.parameters_) out.emplace_back(join_name(path, name), tensor);
  });
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, tensor] : named_parameters()) out.push_back(tensor);
  return out;
}

NamedTensors Module::named_buffers() const { return collect_buffers(false); }

std::size_t Module::num_parameters() const {
  std::size_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return n;
}

Module& Module::train(bool on) {
  walk([on](const Module& m, const std::string&, std::size_t) { const_cast<Module&>(m).training_ = on; });
  return *this;
}

Module& Module::to(DType dtype) {
  NoGradGuard no_grad;
  const auto convert = [dtype](Tensor& t) {
    if (t.dtype() != dtype) t.set_data(t.to(dtype));
  };
  walk([&](const Module& m, const std::string&, std::size_t) {
    Module& module = const_cast<Module&>(m);  // the walk visits this module's own children
    for (auto& [name, tensor] : module.parameters_) convert(tensor);
    for (Buffer& b : module.buffers_) convert(b.value);
  });
  return *this;
}

void Module::zero_grad() {
  for (Tensor& p : parameters()) p.zero_grad();
}

StateDict Module::state_dict() const {
  StateDict state;
  for (auto& [name, tensor] : named_parameters()) state.emplace(name, tensor);
  for (auto& [name, tensor] : collect_buffers(true)) state.emplace(name, tensor);
  return state;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  StateDict handles = state;  // the tensors stay the caller's: copied in
  load_state_dict(std::move(handles), strict);
}

void Module::load_state_dict(StateDict&& state, bool strict) {
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
      message += str(" ", what, ": ", listed(names), ";");
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
    Tensor source = std::move(it->second);
    if (source.dtype() != tensor.dtype()) source = source.to(tensor.dtype());
    Tensor destination = tensor;
    destination.set_data(std::move(source));
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

std::string Module::to_string() const {
  // One pass down to list the modules, one pass up to total each subtree's parameters.
  struct Line {
    const Module* module;
    std::string label;
    std::size_t depth, parameters;
  };
  std::vector<Line> lines;
  walk([&](const Module& m, const std::string& path, std::size_t depth) {
    std::size_t own = 0;
    for (const auto& [name, tensor] : m.parameters_) own += tensor.numel();
    const std::size_t dot = path.rfind('.');
    lines.push_back({&m, dot == std::string::npos ? path : path.substr(dot + 1), depth, own});
  });
  // Backwards through the pre-order list, a module's children come just before it:
  // children_total[d] sums the subtrees met at depth d since their parent's last visit.
  std::vector<std::size_t> children_total(lines.empty() ? 0 : 2 + lines.back().depth);
  for (std::size_t i = lines.size(); i-- > 0;) {
    const std::size_t d = lines[i].depth;
    if (children_total.size() < d + 2) children_total.resize(d + 2);
    lines[i].parameters += children_total[d + 1];
    children_total[d + 1] = 0;
    children_total[d] += lines[i].parameters;
  }
  std::ostringstream os;
  for (const Line& line : lines) {
    os << std::string(2 * line.depth, ' ');
    if (!line.label.empty()) os << '(' << line.label << "): ";
    os << line.module->type_name() << '(' << line.module->extra_repr() << ')';
    if (line.parameters) os << "  # " << with_commas(line.parameters) << " parameters";
    os << '\n';
  }
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Module& module) { return os << module.to_string(); }

}  // namespace xgrad::nn
