#pragma once
// Internal: the graph node behind a Tensor handle. It pulls in xtensor, so only op
// implementations and autograd/xtensor.hpp include it.

#include <atomic>
#include <functional>
#include <new>
#include <variant>

#include <xtensor/xarray.hpp>

#include "xgrad/autograd/tensor.hpp"

namespace xgrad {

using Storage = std::variant<xt::xarray<float>, xt::xarray<double>>;
using NodePtr = std::shared_ptr<Node>;

struct Node {
  // Shared so that detach() is free; parameters are updated in place through it.
  std::shared_ptr<Storage> value;
  // Counts the changes made to `value` in place (set_data, writes through a non-const
  // Tensor::data<T>(), so every optimizer step); shared with detach()'s handles as the
  // value is. An op notes its inputs' and output's counts when it records, and its
  // backward refuses values changed since: their gradient would silently belong to other
  // values, or to another shape.
  std::shared_ptr<std::atomic<std::uint64_t>> version = std::make_shared<std::atomic<std::uint64_t>>(0);
  std::vector<std::uint64_t> recorded_versions;  // the inputs' counts, then this node's own
  // Shared so that Tensor::grad() hands it out without a copy; accumulation is in place.
  std::shared_ptr<Storage> grad;
  bool requires_grad = false;
  const char* op = nullptr;  // the op that made this node; nullptr for a leaf
  // Inputs of the op, kept alive for backward (null for an optional input not given). Backward closures must reach
  // inputs through here and never capture a node: ~Node relies on it to free long chains without recursion.
  std::vector<NodePtr> inputs;
  // Reads this node's grad and adds into the inputs' grads. Empty for leaves and once
  // the graph has been freed.
  std::function<void(Node& self)> backward;
  bool graph_freed = false;
  // Leaves: called when a backward pass has finished this leaf's gradient (by id).
  std::vector<std::pair<std::size_t, std::function<void(const Tensor& leaf)>>> grad_ready_hooks;
  // Set while a backward pass runs through this node. Gradients are added without locks,
  // so a second pass reaching it from another thread at the same time is an Error
  // rather than a lost contribution.
  std::atomic<bool> in_backward{false};

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node();

  bool is_leaf() const { return op == nullptr; }
  void mark_modified() { version->fetch_add(1, std::memory_order_relaxed); }
  // Called once `inputs` is set: notes what check_unmodified() compares against.
  void record_versions();
  // Throws an Error naming the op if an input or the output changed since record_versions().
  void check_unmodified() const;
  DType dtype() const { return value->index() == 0 ? DType::float32 : DType::float64; }
  template <class T>
  xt::xarray<T>& values() {
    return std::get<xt::xarray<T>>(*value);
  }
  template <class T>
  const xt::xarray<T>& values() const {
    return std::get<xt::xarray<T>>(*value);
  }
  Shape shape() const;
};

template <class T>
Shape to_shape(const T& xshape) {
  return Shape(xshape.begin(), xshape.end());
}

template <class T>
typename xt::xarray<T>::shape_type to_xshape(const Shape& shape) {
  return typename xt::xarray<T>::shape_type(shape.begin(), shape.end());
}

// Throws an Error naming `op` and `what` when `bytes` exceed all of this machine's
// memory (RAM and swap together): such a request cannot succeed, and rather than fail
// it an overcommitting kernel kills the process later, a sanitizer aborts at once.
void check_fits_in_memory(const char* op, std::size_t bytes, const std::string& what);

// A new, uninitialised array for `op`: an Error naming the op and the shape, not
// std::bad_alloc, when the machine cannot hold it.
template <class T>
xt::xarray<T> new_array(const char* op, const Shape& shape) {
  std::size_t bytes = 0;
  XGRAD_CHECK(!__builtin_mul_overflow(xgrad::numel(shape), sizeof(T), &bytes), op, "shape ", shape,
              " needs more than 2^64 bytes");
  check_fits_in_memory(op, bytes, str(shape, " ", dtype_of<T>()));
  try {
    return xt::xarray<T>::from_shape(to_xshape<T>(shape));
  } catch (const std::bad_alloc&) {
    fail(op, "cannot allocate ", shape, " ", dtype_of<T>(), " (", bytes >> 20, " MiB)");
  }
}

// Storage for an op's output or a gradient. While a Profiler records, its bytes count
// toward the live total (and its peak) until it is freed.
// (An array is taken as it is: made into the shared Storage in place, not moved twice.)
std::shared_ptr<Storage> make_counted_storage(Storage&& values);
template <class Values>
std::shared_ptr<Storage> make_storage(Values&& values) {
  if (profile::active()) return make_counted_storage(Storage(std::forward<Values>(values)));
  return std::make_shared<Storage>(std::forward<Values>(values));
}

// A leaf tensor owning `values`.
template <class T>
Tensor make_leaf(xt::xarray<T>&& values, bool requires_grad = false) {
  auto node = std::make_shared<Node>();
  node->value = std::make_shared<Storage>(std::move(values));
  node->requires_grad = requires_grad;
  return Tensor(std::move(node));
}

// Adds `grad` into node.grad (taking it when there is none yet).
void accumulate_grad(Node& node, Storage&& grad);

}  // namespace xgrad
