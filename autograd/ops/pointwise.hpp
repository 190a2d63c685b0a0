#pragma once
// Internal: the two shapes every pointwise op takes. An op is its forward expression and
// its gradient expression, nothing else:
//
//   Tensor exp(const Tensor& x) {
//     return unary_op("exp", x, [](const auto& v) { return xt::exp(v); },
//                     [](const auto& g, const auto&, const auto& out) { return g * out; });
//   }
//
// The lambdas receive typed xtensor arrays (float or double) and return expressions.

#include <type_traits>

#include "xgrad/autograd/ops/shape_util.hpp"
#include "xgrad/autograd/record.hpp"

namespace xgrad {

// Element type of an xtensor expression (the generic lambdas below get typed arrays).
template <class E>
using value_t = typename std::decay_t<E>::value_type;

// forward(x) -> values; grad(g, x, y) -> gradient of x (y is the output).
template <class Forward, class Grad>
Tensor unary_op(const char* op, const Tensor& x, Forward forward, Grad grad) {
  check_defined(op, x);
  return dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = forward(x.node()->values<T>());
    return record<T>(op, std::move(out), {x}, [grad](BackwardContext<T>& ctx) {
      ctx.accumulate(0, grad(ctx.grad(), ctx.input(0), ctx.output()));
    });
  });
}

// forward(a, b) -> values; grad_a / grad_b(g, a, b, y) -> gradient at the broadcast shape.
template <class Forward, class GradA, class GradB>
Tensor binary_op(const char* op, const Tensor& a, const Tensor& b, Forward forward, GradA grad_a, GradB grad_b) {
  check_same_dtype(op, a, b);
  broadcast_shapes(op, a.shape(), b.shape());
  return dispatch(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = forward(a.node()->values<T>(), b.node()->values<T>());
    return record<T>(op, std::move(out), {a, b}, [grad_a, grad_b](BackwardContext<T>& ctx) {
      const auto& g = ctx.grad();
      const auto& x = ctx.input(0);
      const auto& y = ctx.input(1);
      const auto& out = ctx.output();
      if (ctx.needs_grad(0)) ctx.accumulate(0, unbroadcast<T>(grad_a(g, x, y, out), to_shape(x.shape())));
      if (ctx.needs_grad(1)) ctx.accumulate(1, unbroadcast<T>(grad_b(g, x, y, out), to_shape(y.shape())));
    });
  });
}

}  // namespace xgrad
