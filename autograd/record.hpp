#pragma once
// Internal: how an op records itself. An op computes its output array inside
// dispatch_op(), then calls record(), handing over the backward closure written right
// beside the forward:
//
//   return dispatch_op(x.dtype(), [&](auto tag) {
//     using T = decltype(tag);
//     ...
//     return record<T>("exp", std::move(y), {x}, [](BackwardContext<T>& ctx) {
//       ctx.accumulate(0, ctx.grad() * ctx.output());
//     });
//   });
//
// Outside grad mode, or when no input requires grad, no graph is built.

#include <initializer_list>
#include <string>
#include <type_traits>

#include "xgrad/autograd/denormals.hpp"
#include "xgrad/autograd/hooks.hpp"
#include "xgrad/autograd/node.hpp"

namespace xgrad {

// dispatch() for an op's forward: the hooks see the op from here to its record() (the
// profiler's forward event), and float32 runs with denormals flushed (autograd/denormals.hpp).
// Ops call this; code that records no op calls dispatch().
template <class F>
decltype(auto) dispatch_op(DType dtype, F&& f) {
  const hooks::ForwardScope op;
  const DenormalModeGuard mode(dtype);
  return dispatch(dtype, std::forward<F>(f));
}

template <class T>
class BackwardContext {
 public:
  explicit BackwardContext(Node& self) : self_(self) {}

  const xt::xarray<T>& grad() const { return std::get<xt::xarray<T>>(*self_.grad); }
  const xt::xarray<T>& output() const { return self_.values<T>(); }
  const xt::xarray<T>& input(std::size_t i) const { return self_.inputs[i]->values<T>(); }
  // False for an optional input that was not given (an undefined Tensor).
  bool needs_grad(std::size_t i) const { return self_.inputs[i] && self_.inputs[i]->requires_grad; }
  Node& input_node(std::size_t i) { return *self_.inputs[i]; }
  bool has_input(std::size_t i) const { return self_.inputs[i] != nullptr; }
  // The op being differentiated: what backward's allocations are named by (new_array).
  const char* op() const { return self_.op; }

  // Adds g (which must have input i's shape) into input i's gradient: an array handed
  // over (std::move) is taken as it is, any other expression is evaluated first, through
  // new_array's guard (evaluate).
  template <class E>
  void accumulate(std::size_t i, E&& g) {
    if (!needs_grad(i)) return;
    if constexpr (std::is_same_v<E, xt::xarray<T>>)
      accumulate_grad(*self_.inputs[i], Storage(std::move(g)));
    else
      accumulate_grad(*self_.inputs[i], Storage(evaluate<T>(op(), g)));
  }

  // Input i's gradient for an op that writes every element of it: when the input has no
  // gradient yet, a new uninitialised buffer (`fresh`: write it, GEMM beta = 0), else the
  // existing one (add into it, beta = 1). Saves the zero fill of grad_buffer.
  struct GradTarget {
    T* data;
    bool fresh;
    T beta() const { return fresh ? T(0) : T(1); }
  };
  GradTarget grad_target(std::size_t i) {
    Node& input = *self_.inputs[i];
    const bool fresh = !input.grad;
    if (fresh) input.grad = make_storage(new_array<T>(self_.op, input.values<T>().shape()));
    return {std::get<xt::xarray<T>>(*input.grad).data(), fresh};
  }

  // Input i's gradient is this node's own, unchanged (an identity's, as add's): where the
  // input has none yet and nothing else holds this node's (which is dropped after its
  // backward anyway), the array is handed over rather than copied, and true returned; the
  // node's gradient is then gone, so this comes after every other use of grad().
  bool take_grad(std::size_t i) {
    Node& input = *self_.inputs[i];
    if (!needs_grad(i) || input.grad || self_.grad.use_count() != 1) return false;
    input.grad = std::move(self_.grad);
    return true;
  }

  // Input i's gradient buffer, zero-filled on first use, for ops that add into it in
  // place (matmul with beta = 1, scatter-add for embedding).
  xt::xarray<T>& grad_buffer(std::size_t i) {
    Node& input = *self_.inputs[i];
    if (!input.grad) input.grad = make_storage(zeros_array<T>(self_.op, input.values<T>().shape()));
    return std::get<xt::xarray<T>>(*input.grad);
  }

 private:
  Node& self_;
};

template <class T, class Backward>
Tensor record(const char* op, xt::xarray<T>&& output, std::initializer_list<Tensor> inputs, Backward&& backward);

// The set-up every op's node shares, record()'s and CustomOp's (autograd/function.cpp):
// `node` holds the result; when grad mode is on and an input requires grad it also keeps
// the op, its inputs and `backward` (called with the node itself). Then the hooks see it.
template <class Backward>
Tensor record_node(NodePtr node, const char* op, const std::vector<Tensor>& inputs, Backward&& backward) {
  bool any_requires_grad = false;
  for (const Tensor& t : inputs) any_requires_grad = any_requires_grad || t.requires_grad();
  if (grad_enabled() && any_requires_grad) {
    node->requires_grad = true;
    node->op = op;
    node->inputs.reserve(inputs.size());
    for (const Tensor& t : inputs) node->inputs.push_back(t.node());
    node->backward = std::forward<Backward>(backward);
  }
  hooks::op_recorded(node, op, inputs);
  return Tensor(std::move(node));
}

template <class T, class Backward>
Tensor record(const char* op, xt::xarray<T>&& output, const std::vector<Tensor>& inputs, Backward&& backward) {
  auto node = std::make_shared<Node>();
  node->value = make_storage(std::move(output));
  return record_node(std::move(node), op, inputs, [fn = std::forward<Backward>(backward)](Node& self) mutable {
    BackwardContext<T> ctx(self);
    fn(ctx);
  });
}

template <class T, class Backward>
Tensor record(const char* op, xt::xarray<T>&& output, std::initializer_list<Tensor> inputs, Backward&& backward) {
  return record<T>(op, std::move(output), std::vector<Tensor>(inputs), std::forward<Backward>(backward));
}

}  // namespace xgrad
