#include "xgrad/autograd/hooks.hpp"

#include <cmath>

#include "xgrad/autograd/precision.hpp"

namespace xgrad::hooks {

namespace {

// Throws an Error naming the op and its inputs' shapes if `values` holds a NaN or Inf.
void check_finite(const char* op, const std::string& phase, const Storage& values, const std::vector<NodePtr>& inputs) {
  const bool finite = std::visit(
      [](const auto& a) {
        for (auto v : a)
          if (!std::isfinite(v)) return false;
        return true;
      },
      values);
  if (finite) return;
  std::string shapes;
  for (const NodePtr& input : inputs)
    if (input) shapes += (shapes.empty() ? "" : ", ") + shape_str(input->shape());
  fail(std::string("anomaly: ") + op, phase, " produced NaN or Inf (inputs ", shapes, ")");
}

// What a profile shows of an op's inputs, e.g. "[2, 3] float32, [3] float32 (bf16 products)".
std::string describe_inputs(const std::vector<Tensor>& inputs) {
  std::string text;
  for (const Tensor& t : inputs) {
    if (!text.empty()) text += ", ";
    text += t.defined() ? str(t.shape(), " ", t.dtype()) : "none";
  }
  if (autocast_precision() == Precision::bfloat16) text += " (bf16 products)";
  return text;
}

std::int64_t bytes_of(const Storage& values) {
  return std::visit(
      [](const auto& a) {
        return static_cast<std::int64_t>(a.size() * sizeof(typename std::decay_t<decltype(a)>::value_type));
      },
      values);
}

}  // namespace

namespace {
thread_local OpObserver* innermost_observer = nullptr;
}

OpObserver::OpObserver() : outer_(innermost_observer) { innermost_observer = this; }
OpObserver::~OpObserver() { innermost_observer = outer_; }

void op_recorded(const NodePtr& output, const char* op, const std::vector<Tensor>& inputs) {
  Node& node = *output;
  if (node.backward) node.record_versions();
  if (innermost_observer) innermost_observer->recorded(output, inputs);
  if (profile::active()) profile::op_recorded(op, describe_inputs(inputs), bytes_of(*node.value));
  if (anomaly_mode_enabled()) {
    std::vector<NodePtr> input_nodes;
    for (const Tensor& t : inputs) input_nodes.push_back(t.node());
    check_finite(op, "forward", *node.value, input_nodes);
  }
}

void before_backward(const Node& node) { node.check_unmodified(); }

void after_backward(const Node& node) {
  if (!anomaly_mode_enabled()) return;
  for (std::size_t i = 0; i < node.inputs.size(); ++i)
    if (node.inputs[i] && node.inputs[i]->grad)
      check_finite(node.op, str("backward (gradient of input ", i, ")"), *node.inputs[i]->grad, node.inputs);
}

profile::EventRef BackwardEvent::open(const Node& node) {
  const profile::EventRef ref = profile::begin(profile::Kind::backward, node.op);
  if (profile::find(ref)) {
    std::string detail;
    for (const NodePtr& input : node.inputs)
      detail += (detail.empty() ? "" : ", ") + (input ? shape_str(input->shape()) : std::string("none"));
    profile::set_detail(ref, detail);
  }
  return ref;
}

}  // namespace xgrad::hooks
