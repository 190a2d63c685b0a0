#pragma once
// The Tensor handle: a cheap, shared reference to one node of the autograd graph, with
// its vocabulary (Shape, DType, dispatch over the dtype, Indices) and the grad-mode
// guards. This header is light on purpose (no xtensor): user code and tests include it
// freely; autograd/xtensor.hpp converts to and from xtensor arrays.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "xgrad/autograd/dtype.hpp"
#include "xgrad/autograd/error.hpp"

namespace xgrad {

using Shape = std::vector<std::size_t>;

std::string shape_str(const Shape& shape);  // "[2, 3]"
std::size_t numel(const Shape& shape);      // an Error past 2^64 elements

// Runs f(float{}) or f(double{}) for the runtime dtype; write the body as a generic
// lambda `[&](auto tag) { using T = decltype(tag); ... }`.
template <class F>
decltype(auto) dispatch(DType dtype, F&& f) {
  if (dtype == DType::float32) return f(float{});
  return f(double{});
}

struct Node;
class Generator;

// Integer ids (token ids, class targets): not differentiable, so not a Tensor.
struct Indices {
  std::vector<std::int64_t> values;
  Shape shape;

  Indices() = default;
  Indices(std::vector<std::int64_t> values, Shape shape);  // checks numel(shape) == values.size()
  std::size_t numel() const { return values.size(); }
  // The fields are public: every op that takes Indices checks they still agree.
  void check(std::string_view op) const;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false
  explicit Tensor(std::shared_ptr<Node> node);

  // Factories. Values are given as double and stored in `dtype`.
  static Tensor from_vector(const std::vector<double>& values, Shape shape, DType dtype = DType::float32,
                            bool requires_grad = false);
  static Tensor scalar(double value, DType dtype = DType::float32);
  static Tensor zeros(Shape shape, DType dtype = DType::float32);
  // Values left uninitialised (memory not even touched): for a tensor about to be
  // overwritten whole, as torch.empty.
  static Tensor empty(Shape shape, DType dtype = DType::float32);
  static Tensor ones(Shape shape, DType dtype = DType::float32);
  static Tensor full(Shape shape, double value, DType dtype = DType::float32);
  static Tensor arange(std::size_t n, DType dtype = DType::float32);
  static Tensor randn(Shape shape, Generator& gen, DType dtype = DType::float32);
  // randn(shape) * std + mean, rounded as those two ops round, made in one array (a model's
  // initialisation peaks at twice a table's size, not four times).
  static Tensor normal(Shape shape, double mean, double std, Generator& gen, DType dtype = DType::float32);
  static Tensor uniform(Shape shape, double low, double high, Generator& gen, DType dtype = DType::float32);

  bool defined() const { return node_ != nullptr; }
  Shape shape() const;
  std::size_t dim() const;
  std::size_t size(int axis) const;  // negative axes count from the end
  std::size_t numel() const;
  DType dtype() const;

  bool requires_grad() const;
  // Marks a leaf as a parameter to differentiate with respect to.
  Tensor& requires_grad_(bool enabled = true);
  bool is_leaf() const;         // made by the user (or detached), not by a recorded op
  const char* op_name() const;  // op that produced this tensor, "" for leaves

  // Undefined until a backward reaches this leaf. Shares the gradient's storage (no
  // copy), which later backward passes add into: clone() to keep a snapshot.
  Tensor grad() const;
  void zero_grad();  // forgets the accumulated gradient
  // Makes a copy of `gradient` (this leaf's shape and dtype) its gradient, as a backward
  // pass would have left it: for code that computes gradients itself (an all-reduce
  // writing the averages back).
  void set_grad(const Tensor& gradient);
  // Calls `hook(leaf)` in every later backward pass that reaches this leaf, as soon as
  // the pass has added all it will add to its gradient (every op that used the leaf has
  // run its backward), while the rest of the pass is still to run: work on a finished
  // gradient (a gradient all-reduce) can overlap what remains. Hooks run on the thread of
  // backward(), in the order they were added; an exception from one ends the pass. A
  // hook may add or remove hooks, itself too (one added runs from the next pass).
  // Returns an id for remove_grad_ready_hook, never reused. Leaves only.
  std::size_t add_grad_ready_hook(std::function<void(const Tensor& leaf)> hook);
  void remove_grad_ready_hook(std::size_t id);
  Tensor detach() const;         // same data, no graph, requires_grad false
  Tensor to(DType dtype) const;  // differentiable cast
  Tensor clone() const;          // copy of the data, no graph
  // Replaces this leaf's data by a copy of source's (shape and dtype may change) while
  // keeping its node, so every handle to it (a layer's member, a module's registry) sees
  // the new data. Drops the gradient. Module::to() and load_state_dict() use it.
  void set_data(const Tensor& source);
  // The same, taking source's storage instead of copying it when nothing else can see it
  // (source the only handle to a tensor that owns its storage alone); else a copy.
  void set_data(Tensor&& source);

  double item() const;  // the value of a one-element tensor
  std::vector<double> to_vector() const;
  // Raw contiguous row-major data; T must match dtype() (checked).
  template <class T>
  T* data();
  template <class T>
  const T* data() const;

  // Reverse-mode sweep from this tensor. A scalar root is seeded with 1; any other
  // root needs a seed of its shape. The graph is freed afterwards unless retain_graph.
  void backward(bool retain_graph = false) const;
  void backward(const Tensor& seed, bool retain_graph = false) const;

  const std::shared_ptr<Node>& node() const { return node_; }

 private:
  std::shared_ptr<Node> node_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// The checks most ops start with.
void check_defined(std::string_view op, const Tensor& t);
void check_same_dtype(std::string_view op, const Tensor& a, const Tensor& b);

// While alive, ops record no graph (evaluation, optimizer updates).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};
bool grad_enabled();

// While alive, the first op whose forward output or backward gradient holds a NaN or
// Inf throws an Error naming the op and its input shapes.
class AnomalyModeGuard {
 public:
  AnomalyModeGuard();
  ~AnomalyModeGuard();
  AnomalyModeGuard(const AnomalyModeGuard&) = delete;
  AnomalyModeGuard& operator=(const AnomalyModeGuard&) = delete;

 private:
  bool previous_;
};
bool anomaly_mode_enabled();

}  // namespace xgrad
