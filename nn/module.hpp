#pragma once
// Module: the base of every layer and model, as torch.nn.Module. A module registers its
// parameters, buffers and submodules by name; everything else (dotted names, train/eval,
// dtype conversion, state dicts, printing) follows from that registry.
//
//   class Affine : public nn::Module {
//    public:
//     explicit Affine(std::size_t d)
//         : scale(register_parameter("scale", Tensor::ones({d}))),
//           shift(register_parameter("shift", Tensor::zeros({d}))) {}
//     Tensor forward(const Tensor& x) override { return x * scale + shift; }
//     Tensor scale, shift;
//   };

#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "xgrad/autograd/state.hpp"
#include "xgrad/autograd/tensor.hpp"

namespace xgrad::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using StateDict = xgrad::StateDict;

class Module : public Stateful {
 public:
  Module() = default;
  virtual ~Module();  // releases any depth of nested children without recursion
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The single-tensor call that Sequential chains. Layers with other inputs (Embedding's
  // ids, attention's query/key/value) add their own forward; this one then throws.
  virtual Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }

  // Recursive, in registration order, with dotted paths: "blocks.0.attn.w_q.weight".
  // Every walk over the tree is iterative: any nesting depth works, and a module that
  // contains itself is an Error.
  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  NamedTensors named_buffers() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const { return children_; }
  std::size_t num_parameters() const;  // total element count

  Module& train(bool on = true);  // recursive
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }

  // Converts every parameter and buffer in place (handles held by layers stay valid).
  // Gradients are dropped (PyTorch converts them): call it before backward, not between
  // backward and the optimizer's step.
  Module& to(DType dtype);
  void zero_grad();

  // Parameters and persistent buffers by dotted name (the tensors themselves, not copies).
  StateDict state_dict() const override;
  // Copies values in (converted to each destination's dtype). Checks everything first:
  // missing or unexpected names (strict) and shape mismatches throw one Error listing
  // them all, and leave the module unchanged.
  void load_state_dict(const StateDict& state, bool strict = true) override;
  // The same, taking each tensor's storage where state held its only handle (a model
  // loaded from a file without a second copy of its weights).
  void load_state_dict(StateDict&& state, bool strict = true);

  // "Linear" etc. (the class name by default) and the details shown in its print.
  virtual std::string type_name() const;
  virtual std::string extra_repr() const { return ""; }
  // The module tree, one line per module with its parameter count.
  std::string to_string() const;

 protected:
  // Registers a parameter (requires_grad is set) and returns the same tensor handle.
  Tensor register_parameter(const std::string& name, Tensor value);
  // A buffer is state that is not trained (a running statistic, a fixed table);
  // non-persistent ones are left out of the state dict.
  Tensor register_buffer(const std::string& name, Tensor value, bool persistent = true);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }
  // Unregisters the submodule `name` (a layer taking an adapter off); an Error when
  // there is none by that name.
  void remove_module(const std::string& name);

 private:
  struct Buffer {
    std::string name;
    Tensor value;
    bool persistent;
  };
  void check_new_name(const std::string& name) const;
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  // f(module, path, depth) for this module and every one under it, parents first,
  // children in registration order.
  template <class F>
  void walk(F&& f) const;
  NamedTensors collect_buffers(bool persistent_only) const;

  NamedTensors parameters_;
  std::vector<Buffer> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

std::ostream& operator<<(std::ostream& os, const Module& module);

}  // namespace xgrad::nn
