#include "xgrad/autograd/recompute.hpp"

#include <algorithm>
#include <functional>
#include <memory>
#include <unordered_set>

#include "xgrad/autograd/precision.hpp"
#include "xgrad/autograd/random.hpp"
#include "xgrad/autograd/record.hpp"

namespace xgrad {

namespace {

constexpr const char* kOp = "recompute";

// One run of the function, seen op by op: the nodes it made, which of them depend on its
// inputs, and the tensors requiring grad that its ops read without having made them (its
// inputs and what it captured, parameters above all): the boundary of its graph.
class ForwardTrace : public hooks::OpObserver {
 public:
  explicit ForwardTrace(const std::vector<Tensor>& inputs) {
    for (const Tensor& input : inputs) from_inputs_.insert(input.node().get());
  }

  void recorded(const NodePtr& output, const std::vector<Tensor>& inputs) override {
    bool from_inputs = false;
    for (const Tensor& input : inputs) {
      if (!input.defined()) continue;
      const Node* node = input.node().get();
      from_inputs = from_inputs || from_inputs_.contains(node);
      if (input.requires_grad() && !made_.contains(node) && read_set_.insert(node).second)
        read_.push_back(input.node());
    }
    made_.insert(output.get());
    pinned_.push_back(output);  // its address is not reused by a later node while traced
    if (from_inputs) from_inputs_.insert(output.get());
  }

  bool made(const Tensor& t) const { return made_.contains(t.node().get()); }
  bool from_inputs(const Tensor& t) const { return from_inputs_.contains(t.node().get()); }
  const std::vector<NodePtr>& read() const { return read_; }

 private:
  std::unordered_set<const Node*> made_, from_inputs_, read_set_;
  std::vector<std::weak_ptr<const Node>> pinned_;
  std::vector<NodePtr> read_;
};

// Sets each generator back to its state before the first run drew from it; puts back the
// states they had when it goes, so the second run takes nothing from anyone's stream.
class GeneratorReplay {
 public:
  explicit GeneratorReplay(const std::vector<GeneratorRecorder::Start>& starts) {
    for (const GeneratorRecorder::Start& start : starts) {
      current_.push_back({start.generator, *start.generator});
      *start.generator = start.state;
    }
  }
  ~GeneratorReplay() {
    for (const GeneratorRecorder::Start& state : current_) *state.generator = state.state;
  }
  GeneratorReplay(const GeneratorReplay&) = delete;
  GeneratorReplay& operator=(const GeneratorReplay&) = delete;

 private:
  std::vector<GeneratorRecorder::Start> current_;
};

// What the second run must reproduce of the first.
struct FirstRun {
  RecomputedFunction fn;
  std::size_t inputs = 0;         // the node's first inputs are fn's; the rest it captured
  std::vector<const Node*> read;  // its boundary (kept alive as the node's inputs)
  Shape shape;
  DType dtype = DType::float32;
  Precision precision = Precision::float32;
  std::vector<GeneratorRecorder::Start> generators;
};

void check_computed(const Tensor& output, const ForwardTrace& trace, std::size_t inputs, const char* run) {
  XGRAD_CHECK(output.defined(), kOp, "the function returned an undefined tensor (", run, ")");
  XGRAD_CHECK(trace.made(output), kOp, "the function returned a ", output.dtype(), " ", output.shape(),
              " tensor that none of its ops computed (one of its inputs, or a tensor it captured), ", run,
              ": there is nothing to recompute");
  XGRAD_CHECK(inputs == 0 || trace.from_inputs(output), kOp, "the function's output ", output.dtype(), " ",
              output.shape(), " depends on none of its ", inputs, " inputs (", run,
              "): it must compute its output from them");
}

std::vector<const Node*> nodes_of(const std::vector<NodePtr>& read) {
  std::vector<const Node*> nodes;
  for (const NodePtr& node : read) nodes.push_back(node.get());
  std::sort(nodes.begin(), nodes.end(), std::less<>());
  return nodes;
}

// The node's backward: fn again, recording, from the same inputs, with the first run's
// random numbers and precision; then its graph's backward down to the boundary.
void run_again(const FirstRun& first, Node& self) {
  std::vector<Tensor> inputs;
  for (std::size_t i = 0; i < first.inputs; ++i) inputs.emplace_back(self.inputs[i]);
  Tensor output;
  {
    const EnableGradGuard grad;
    const AutocastGuard autocast(first.precision);
    const GeneratorReplay replay(first.generators);
    const GeneratorRecorder drawn;
    ForwardTrace trace(inputs);
    output = first.fn(inputs);
    check_computed(output, trace, inputs.size(), "when run again for backward");
    XGRAD_CHECK(output.shape() == first.shape && output.dtype() == first.dtype, kOp, "the function returned ",
                first.dtype, " ", first.shape, " in the forward pass but ", output.dtype(), " ", output.shape(),
                " when run again for backward: it must compute the same thing each time");
    XGRAD_CHECK(nodes_of(trace.read()) == first.read, kOp,
                "the function read other tensors that require grad when run again for backward (", trace.read().size(),
                ") than in the forward pass (", first.read.size(), "): it must compute the same thing each time");
    bool same_generators = drawn.starts().size() == first.generators.size();
    for (std::size_t i = 0; same_generators && i < first.generators.size(); ++i)
      same_generators = drawn.starts()[i].generator == first.generators[i].generator;
    XGRAD_CHECK(same_generators, kOp, "the function drew from other random generators when run again for backward (",
                drawn.starts().size(), ") than in the forward pass (", first.generators.size(),
                "): it must compute the same thing each time");
    XGRAD_CHECK(output.requires_grad(), kOp, "the function's output ", output.shape(),
                " depends on none of the tensors requiring grad that it read");
  }
  const std::unordered_set<const Node*> boundary(first.read.begin(), first.read.end());
  backward_within(output.node(), self.grad, boundary);
}

}  // namespace

Tensor recompute(const RecomputedFunction& fn, const std::vector<Tensor>& inputs) {
  XGRAD_CHECK(fn, kOp, "the function is empty");
  for (std::size_t i = 0; i < inputs.size(); ++i) XGRAD_CHECK(inputs[i].defined(), kOp, "input ", i, " is undefined");
  if (!grad_enabled()) return fn(inputs);
  const hooks::ForwardScope profiled;  // an op like any other in a profile

  FirstRun first;
  first.fn = fn;
  first.inputs = inputs.size();
  first.precision = autocast_precision();
  Tensor output;
  std::vector<NodePtr> read;
  {
    const NoGradGuard no_grad;  // nothing inside is kept for backward
    const GeneratorRecorder drawn;
    ForwardTrace trace(inputs);
    output = fn(inputs);
    check_computed(output, trace, inputs.size(), "in the forward pass");
    read = trace.read();
    first.generators = drawn.starts();
  }
  if (read.empty()) return output;  // nothing to differentiate: no graph, as fn(inputs) would have none

  first.read = nodes_of(read);
  first.shape = output.shape();
  first.dtype = output.dtype();
  std::vector<Tensor> node_inputs = inputs;
  for (const NodePtr& node : read)
    if (std::none_of(inputs.begin(), inputs.end(), [&](const Tensor& t) { return t.node() == node; }))
      node_inputs.emplace_back(node);
  // The first run's result itself, as a node whose backward runs the function again.
  auto node = std::make_shared<Node>();
  node->value = output.node()->value;
  node->version = output.node()->version;
  return record_node(std::move(node), kOp, node_inputs,
                     [first = std::move(first)](Node& self) { run_again(first, self); });
}

}  // namespace xgrad
