#include "xgrad/autograd/function.hpp"

#include <mutex>
#include <set>

#include "xgrad/autograd/record.hpp"

namespace xgrad {

namespace {

// Node::op must outlive every node; custom names are few, so keep each one forever.
const char* interned(const std::string& name) {
  static std::mutex lock;
  static std::set<std::string> names;
  std::lock_guard<std::mutex> guard(lock);
  return names.insert(name).first->c_str();
}

// A leaf handle on `value`: what user code sees in forward and backward.
Tensor view_of(const std::shared_ptr<Storage>& value) {
  auto node = std::make_shared<Node>();
  node->value = value;
  return Tensor(std::move(node));
}

// The same on a node's value, sharing its change count: a write through the handle is
// a change of the node.
Tensor view_of(const Node& of) {
  Tensor view = view_of(of.value);
  view.node()->version = of.version;
  return view;
}

}  // namespace

Tensor CustomOp::apply(const std::vector<Tensor>& inputs) const {
  const hooks::ForwardScope profiled;  // a custom op is an op like any other in a profile
  const char* op_name = interned(name.empty() ? "custom op" : name);
  XGRAD_CHECK(forward && backward, op_name, "both forward and backward must be set");
  std::vector<Tensor> views;
  bool float32 = false;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    XGRAD_CHECK(inputs[i].defined(), op_name, "input ", i, " is undefined");
    views.push_back(view_of(*inputs[i].node()));
    float32 = float32 || inputs[i].dtype() == DType::float32;
  }
  Tensor output;
  {
    // As a built-in op's forward (dispatch_op) and every backward: float32 work flushes
    // denormals, so that recompute() and the backward see the forward's own numbers.
    const DenormalModeGuard mode(float32 ? DType::float32 : DType::float64);
    NoGradGuard no_grad;
    output = forward(views);
  }
  XGRAD_CHECK(output.defined(), op_name, "forward returned an undefined tensor");

  // The forward's result itself, not a copy: it may be a view of an input, so its change
  // count comes along.
  auto node = std::make_shared<Node>();
  node->value = output.node()->value;
  node->version = output.node()->version;
  return record_node(std::move(node), op_name, inputs, [backward = backward, name = op_name](Node& self) {
    std::vector<Tensor> ins;
    for (const NodePtr& input : self.inputs) ins.push_back(view_of(*input));
    std::vector<Tensor> grads;
    {
      NoGradGuard no_grad;
      grads = backward(ins, view_of(self), view_of(self.grad));
    }
    XGRAD_CHECK(grads.size() == ins.size(), name, "backward returned ", grads.size(), " gradients for ", ins.size(),
                " inputs");
    for (std::size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined() || !self.inputs[i]->requires_grad) continue;
      XGRAD_CHECK(grads[i].shape() == ins[i].shape() && grads[i].dtype() == ins[i].dtype(), name,
                  "backward's gradient ", i, " is ", grads[i].dtype(), " ", grads[i].shape(), " but input ", i, " is ",
                  ins[i].dtype(), " ", ins[i].shape());
      accumulate_grad(*self.inputs[i], Storage(*grads[i].node()->value));
    }
  });
}

}  // namespace xgrad
