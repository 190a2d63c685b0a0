#pragma once
// Internal: the graph node behind a Tensor handle, and new_array, through which every
// array an op outputs is made. It pulls in xtensor and xgrad's storage types, so only the
// autograd layer's own sources include it (the build keeps it from every other layer).

#include <atomic>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <unordered_set>
#include <variant>

#include <xtensor/xarray.hpp>
#include <xtensor/xnoalias.hpp>

#include "xgrad/autograd/detail/heap.hpp"
#include "xgrad/autograd/memory.hpp"
#include "xgrad/autograd/profile.hpp"
#include "xgrad/autograd/tensor.hpp"

namespace xgrad {

namespace kernels {
class Bf16Weight;
}

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
  // Leaves: called when a backward pass has finished this leaf's gradient (by id; ids
  // are never reused, so a stale id cannot remove a later hook).
  std::vector<std::pair<std::size_t, std::function<void(const Tensor& leaf)>>> grad_ready_hooks;
  std::size_t next_hook_id = 0;
  // Set while a backward pass runs through this node. Gradients are added without locks,
  // so a second pass reaching it from another thread at the same time is an Error
  // rather than a lost contribution.
  std::atomic<bool> in_backward{false};
  // A leaf's value rounded to bfloat16 for bf16 products, with the blocked copies oneDNN
  // reads (kernels/onednn_matmul.hpp): made by the first product after a change, or by the
  // optimizer's update as it writes the values (Bf16RoundingRefresh), reused by every
  // product until the next (each micro-batch, recomputed forward and generated token of a
  // step). An op's output may carry one too, made as the op wrote it (linear_relu's, for
  // the linear that reads it next). Checked against `value` and `version` before each use.
  std::atomic<std::shared_ptr<const kernels::Bf16Weight>> bf16_weight;

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

// Throws an Error naming `op` and what it allocates (`what`, streamed only then: this
// runs for every array) when `bytes` exceed the memory this process can have: such a
// request cannot succeed, and rather than fail it an overcommitting kernel kills the
// process later, a sanitizer aborts at once.
template <class... What>
void check_fits_in_memory(const char* op, std::size_t bytes, const What&... what) {
  const std::size_t usable = usable_memory_bytes();
  XGRAD_CHECK(bytes <= usable, op, "cannot allocate ", what..., ": ", bytes >> 20, " MiB, more than the ", usable >> 20,
              " MiB of memory this process can have");
}

// Throws the Error new_array gives for an array of `shape` too large for the process:
// past 2^64 bytes (`bytes` empty) or past its memory.
[[noreturn]] void refuse_array(const char* op, const Shape& shape, DType dtype, std::optional<std::size_t> bytes);

// A new, uninitialised array for `op` of `dims` (a Shape, or xtensor's shape type): an
// Error naming the op and the shape, not std::bad_alloc, when the machine cannot hold it.
// Every op's output goes through here, so the check costs a few multiplications.
template <class T, class Dims>
xt::xarray<T> new_array(const char* op, const Dims& dims) {
  std::size_t bytes = sizeof(T);
  bool overflow = false, empty = false;
  for (const auto d : dims) {
    empty = empty || d == 0;
    overflow = __builtin_mul_overflow(bytes, static_cast<std::size_t>(d), &bytes) || overflow;
  }
  if (empty) bytes = 0;  // no element: no size is too large
  if ((overflow && !empty) || bytes > usable_memory_bytes()) [[unlikely]]
    refuse_array(op, Shape(dims.begin(), dims.end()), dtype_of<T>(),
                 overflow && !empty ? std::nullopt : std::optional(bytes));
  try {
    xt::xarray<T> out = xt::xarray<T>::from_shape(typename xt::xarray<T>::shape_type(dims.begin(), dims.end()));
    detail::advise_heap_growth();  // before the array is written: its pages fault in huge
    return out;
  } catch (const std::bad_alloc&) {
    fail(op, "cannot allocate ", Shape(dims.begin(), dims.end()), " ", dtype_of<T>(), " (", bytes >> 20, " MiB)");
  }
}

// A new zero-filled array for `op`, through new_array's guard.
template <class T, class ShapeLike>
xt::xarray<T> zeros_array(const char* op, const ShapeLike& shape) {
  xt::xarray<T> out = new_array<T>(op, shape);
  out.fill(T(0));
  return out;
}

// An xtensor expression (a + b, xt::cast<T>(v), an array to copy) evaluated into a new
// array for `op`: allocated through new_array's guard for the expression's (broadcast)
// shape, then assigned as xtensor's own `xt::xarray<T> out = expression;` would, so the
// values are the same bits and nothing is copied twice. Every array an op makes by
// evaluating an expression is made here; an array that is moved is not.
template <class T, class E>
xt::xarray<T> evaluate(const char* op, const E& expression) {
  xt::xarray<T> out = new_array<T>(op, expression.shape());
  xt::noalias(out) = expression;
  return out;
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

// While alive, ops record a graph whatever grad mode the caller set (torch.enable_grad):
// recompute() rebuilds a block's graph inside a backward pass.
class EnableGradGuard {
 public:
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

// A backward sweep inside another one, over a graph built while the outer pass runs
// (recompute()'s): from `root`, whose gradient is `grad` (shared, not copied), down to
// `boundary`, nodes of the outer graph. Those only receive gradients here: the outer
// pass has claimed them, and runs their backward and their grad-ready hooks later.
void backward_within(const NodePtr& root, std::shared_ptr<Storage> grad,
                     const std::unordered_set<const Node*>& boundary);

}  // namespace xgrad
