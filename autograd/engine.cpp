// The reverse sweep: order the graph below a root, then run each node's backward
// closure from the root down, accumulating gradients into the inputs. docs/engine.md
// walks through it.

#include <algorithm>
#include <exception>
#include <unordered_set>

#include "xgrad/autograd/denormals.hpp"
#include "xgrad/autograd/hooks.hpp"
#include "xgrad/autograd/parallel.hpp"

namespace xgrad {

namespace {
thread_local bool grad_mode = true;
thread_local bool anomaly_mode = false;
}  // namespace

bool grad_enabled() { return grad_mode; }
NoGradGuard::NoGradGuard() : previous_(grad_mode) { grad_mode = false; }
NoGradGuard::~NoGradGuard() { grad_mode = previous_; }
EnableGradGuard::EnableGradGuard() : previous_(grad_mode) { grad_mode = true; }
EnableGradGuard::~EnableGradGuard() { grad_mode = previous_; }

bool anomaly_mode_enabled() { return anomaly_mode; }
AnomalyModeGuard::AnomalyModeGuard() : previous_(anomaly_mode) { anomaly_mode = true; }
AnomalyModeGuard::~AnomalyModeGuard() { anomaly_mode = previous_; }

void accumulate_grad(Node& node, Storage&& grad) {
  if (!node.grad) {
    node.grad = make_storage(std::move(grad));
    return;
  }
  const profile::Scope profiled(profile::Kind::engine, "accumulate gradient");
  std::visit(
      [&](auto& acc) {
        using Array = std::decay_t<decltype(acc)>;
        const Array& g = std::get<Array>(grad);
        XGRAD_CHECK(acc.shape() == g.shape(), "backward", "internal error: a gradient of shape ", to_shape(g.shape()),
                    " reached a tensor of shape ", to_shape(acc.shape()));
        // On the pool, element by element: the same bits on any number of threads. Its
        // work an element counted as a pointwise op's (ops/pointwise.hpp).
        auto* sum = acc.data();
        const auto* add = g.data();
        parallel_for_chunks(acc.size(), kElementsPerChunk, 8.0, [&](std::size_t begin, std::size_t end) {
          for (std::size_t i = begin; i < end; ++i) sum[i] += add[i];
        });
      },
      *node.grad);
}

namespace {

// Nodes reachable from root through inputs that require grad, inputs before users; the
// walk stops at (and leaves out) the nodes of `boundary`.
std::vector<NodePtr> topological_order(const NodePtr& root, const std::unordered_set<const Node*>& boundary) {
  const profile::Scope walk(profile::Kind::engine, "graph walk");
  std::vector<NodePtr> order;
  std::unordered_set<const Node*> visited{root.get()};
  std::vector<std::pair<Node*, std::size_t>> stack{{root.get(), 0}};
  std::vector<NodePtr> owners{root};  // parallel to stack: keeps each node alive
  while (!stack.empty()) {
    auto& [node, next_input] = stack.back();
    if (next_input < node->inputs.size()) {
      const NodePtr& input = node->inputs[next_input++];
      if (!input || !input->requires_grad || boundary.contains(input.get()) || !visited.insert(input.get()).second)
        continue;
      XGRAD_CHECK(!input->graph_freed, "backward", "the graph through '", input->op,
                  "' was freed by an earlier backward(); pass retain_graph = true to "
                  "the first call to go through it again");
      stack.emplace_back(input.get(), 0);
      owners.push_back(input);
    } else {
      order.push_back(std::move(owners.back()));
      owners.pop_back();
      stack.pop_back();
    }
  }
  return order;
}

// Marks every node of one backward pass as in use for as long as the pass runs.
class BackwardClaim {
 public:
  explicit BackwardClaim(const std::vector<NodePtr>& nodes) {
    for (const NodePtr& node : nodes) {
      if (node->in_backward.exchange(true)) {
        release();
        fail("backward", "another backward pass is running through '", node->op ? node->op : "a leaf tensor", "' ",
             node->shape(),
             " at the same time (from another thread, or from a gradient hook of that pass); run backward "
             "passes through shared tensors one at a time");
      }
      claimed_.push_back(node.get());
    }
  }
  ~BackwardClaim() { release(); }
  BackwardClaim(const BackwardClaim&) = delete;
  BackwardClaim& operator=(const BackwardClaim&) = delete;

 private:
  void release() {
    for (Node* node : claimed_) node->in_backward.store(false);
    claimed_.clear();
  }
  std::vector<Node*> claimed_;
};

// Gradients a pass leaves when it ends early (an op's backward, a hook or anomaly mode
// threw): dropped from the non-leaf nodes, so that running the pass again does not add
// them twice, and from the leaves that had none before it, so that no leaf holds a part of
// it. (A leaf that already held a gradient, accumulating over micro-batches, keeps what
// was added into it in place: restoring it would cost a copy of every gradient per pass.)
class PartialGradients {
 public:
  explicit PartialGradients(const std::vector<NodePtr>& order) : order_(order) {
    for (const NodePtr& node : order_)
      if (node->is_leaf() && !node->grad) fresh_leaves_.push_back(node.get());
  }
  ~PartialGradients() {
    if (std::uncaught_exceptions() == 0) return;
    for (const NodePtr& node : order_)
      if (!node->is_leaf()) node->grad.reset();
    for (Node* leaf : fresh_leaves_) leaf->grad.reset();
  }
  PartialGradients(const PartialGradients&) = delete;
  PartialGradients& operator=(const PartialGradients&) = delete;

 private:
  const std::vector<NodePtr>& order_;
  std::vector<Node*> fresh_leaves_;
};

// Every user of a leaf comes before it in the sweep: its gradient is final, and the
// hooks waiting for it run.
void finish_leaf(const NodePtr& leaf) {
  if (!leaf->grad || leaf->grad_ready_hooks.empty()) return;
  // A hook may add or remove hooks, itself too: the hooks there when the gradient became
  // ready run, from a copy (a hook removing itself destroyed the closure running), each
  // unless an earlier one removed it.
  const auto ready = leaf->grad_ready_hooks;
  for (const auto& [id, hook] : ready) {
    const auto& now = leaf->grad_ready_hooks;
    if (std::any_of(now.begin(), now.end(), [id = id](const auto& entry) { return entry.first == id; }))
      hook(Tensor(leaf));
  }
}

// One node's backward closure, inside the hooks; then its gradient is dropped (only
// leaves keep theirs) and, unless retain_graph, its part of the graph freed.
void backward_through(Node& node, bool retain_graph) {
  hooks::before_backward(node);
  {
    const hooks::BackwardEvent profiled(node);
    const DenormalModeGuard mode(node.dtype());
    node.backward(node);
  }
  hooks::after_backward(node);
  node.grad.reset();
  if (!retain_graph) {
    node.backward = nullptr;
    node.inputs.clear();
    node.graph_freed = true;
  }
}

// `seed` gives the root its gradient once the nodes are claimed.
template <class Seed>
void run_backward(const NodePtr& root, Seed&& seed, bool retain_graph,
                  const std::unordered_set<const Node*>& boundary = {}) {
  const std::vector<NodePtr> order = topological_order(root, boundary);
  const BackwardClaim claim(order);
  const PartialGradients partial(order);
  seed(*root);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if ((*it)->is_leaf())
      finish_leaf(*it);
    else if ((*it)->grad)  // reached from the root
      backward_through(**it, retain_graph);
  }
}

}  // namespace

void backward_within(const NodePtr& root, std::shared_ptr<Storage> grad,
                     const std::unordered_set<const Node*>& boundary) {
  run_backward(
      root, [&](Node& node) { node.grad = std::move(grad); }, /*retain_graph=*/false, boundary);
}

void Tensor::backward(bool retain_graph) const {
  XGRAD_CHECK(defined(), "backward", "called on an undefined tensor");
  XGRAD_CHECK(numel() == 1, "backward", "the root has shape ", shape(),
              "; a non-scalar root needs a seed gradient of that shape: backward(seed)");
  backward(Tensor::ones(shape(), dtype()), retain_graph);
}

void Tensor::backward(const Tensor& seed, bool retain_graph) const {
  XGRAD_CHECK(defined(), "backward", "called on an undefined tensor");
  XGRAD_CHECK(seed.defined(), "backward", "the seed gradient is undefined");
  XGRAD_CHECK(node_->requires_grad, "backward", "the root ", shape(),
              " does not require grad: no input of the computation had requires_grad "
              "set, or it ran under NoGradGuard");
  XGRAD_CHECK(!node_->graph_freed, "backward", "the graph of '", node_->op,
              "' was freed by an earlier backward(); pass retain_graph = true to the "
              "first call to run backward twice");
  XGRAD_CHECK(seed.shape() == shape(), "backward", "seed gradient of shape ", seed.shape(),
              " does not match the root's shape ", shape());
  const Tensor typed_seed = seed.dtype() == dtype() ? seed.clone() : seed.detach().to(dtype());
  run_backward(
      node_, [&](Node& root) { accumulate_grad(root, Storage(*typed_seed.node()->value)); }, retain_graph);
}

}  // namespace xgrad
