#pragma once
// Internal: how an op records itself. An op computes its output array, then calls
// record(), handing over the backward closure written right beside the forward:
//
//   return record<T>("exp", std::move(y), {x}, [](BackwardContext<T>& ctx) {
//     ctx.accumulate(0, ctx.grad() * ctx.output());
//   });
//
// Outside grad mode, or when no input requires grad, no graph is built.

#include <initializer_list>
#include <string>

#include "xgrad/autograd/node.hpp"

namespace xgrad {

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

  // Adds g (which must have input i's shape) into input i's gradient.
  template <class E>
  void accumulate(std::size_t i, E&& g) {
    if (!needs_grad(i)) return;
    xt::xarray<T> grad_i = std::forward<E>(g);
    accumulate_grad(*self_.inputs[i], Storage(std::move(grad_i)));
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
    if (fresh) input.grad = make_storage(xt::xarray<T>::from_shape(input.values<T>().shape()));
    return {std::get<xt::xarray<T>>(*input.grad).data(), fresh};
  }

  // Input i's gradient buffer, zero-filled on first use, for ops that add into it in
  // place (matmul with beta = 1, scatter-add for embedding).
  xt::xarray<T>& grad_buffer(std::size_t i) {
    Node& input = *self_.inputs[i];
    if (!input.grad) input.grad = make_storage(xt::xarray<T>(xt::zeros<T>(input.values<T>().shape())));
    return std::get<xt::xarray<T>>(*input.grad);
  }

 private:
  Node& self_;
};

// Throws if anomaly mode is on and `values` holds a NaN or Inf.
void check_anomaly(const char* op, const char* phase, const Storage& values, const std::vector<NodePtr>& inputs);

template <class T, class Backward>
Tensor record(const char* op, xt::xarray<T>&& output, std::initializer_list<Tensor> inputs, Backward&& backward);

template <class T, class Backward>
Tensor record(const char* op, xt::xarray<T>&& output, const std::vector<Tensor>& inputs, Backward&& backward) {
  auto node = std::make_shared<Node>();
  const auto output_bytes = static_cast<std::int64_t>(output.size() * sizeof(T));
  node->value = make_storage(std::move(output));
  bool any_requires_grad = false;
  for (const Tensor& t : inputs) any_requires_grad = any_requires_grad || t.requires_grad();
  if (grad_enabled() && any_requires_grad) {
    node->requires_grad = true;
    node->op = op;
    node->inputs.reserve(inputs.size());
    for (const Tensor& t : inputs) node->inputs.push_back(t.node());
    node->record_versions();
    node->backward = [fn = std::forward<Backward>(backward)](Node& self) mutable {
      BackwardContext<T> ctx(self);
      fn(ctx);
    };
  }
  if (profile::active()) profile::op_recorded(op, inputs, output_bytes);
  if (anomaly_mode_enabled()) {
    std::vector<NodePtr> input_nodes;
    for (const Tensor& t : inputs) input_nodes.push_back(t.node());
    check_anomaly(op, "forward", *node->value, input_nodes);
  }
  return Tensor(std::move(node));
}

template <class T, class Backward>
Tensor record(const char* op, xt::xarray<T>&& output, std::initializer_list<Tensor> inputs, Backward&& backward) {
  return record<T>(op, std::move(output), std::vector<Tensor>(inputs), std::forward<Backward>(backward));
}

}  // namespace xgrad
