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

#include <array>
#include <type_traits>

#include <xtensor/xadapt.hpp>
#include <xtensor/xnoalias.hpp>

#include "xgrad/autograd/ops/shape_util.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/autograd/record.hpp"

namespace xgrad {

// Element type of an xtensor expression (the generic lambdas below get typed arrays).
template <class E>
using value_t = typename std::decay_t<E>::value_type;

namespace pointwise {

// Passes run on the pool in chunks of kElementsPerChunk once an array is large enough;
// every element is computed on its own, so the bits never depend on the cut.
inline constexpr double kWorkPerElement = 8;

// Elements [begin, end) of a contiguous array, as a 1-D xtensor array.
template <class T>
auto chunk(const T* data, std::size_t begin, std::size_t end) {
  return xt::adapt(const_cast<T*>(data) + begin, end - begin, xt::no_ownership(),
                   std::array<std::size_t, 1>{end - begin});
}

// dst = f(sources) (or dst += f(sources) when `add`) over n elements, chunk by chunk: f
// gets each source's chunk and returns an expression over them.
template <class T, class F, class... Sources>
void assign(T* dst, std::size_t n, bool add, F&& f, const Sources*... sources) {
  parallel_for_chunks(n, kElementsPerChunk, kWorkPerElement, [&](std::size_t begin, std::size_t end) {
    auto target = chunk(dst, begin, end);  // noalias: assign values (f may return an adaptor like target)
    if (add)
      xt::noalias(target) += f(chunk(sources, begin, end)...);
    else
      xt::noalias(target) = f(chunk(sources, begin, end)...);
  });
}

}  // namespace pointwise

// The frame of a one-input pointwise op: run_forward(x, y, n) fills the output from the
// input, run_grad(g, x, y, dx, n, add) writes (or adds, when `add`) the input's gradient;
// each over whole contiguous arrays.
template <class RunForward, class RunGrad>
Tensor unary_pointwise(const char* op, const Tensor& x, RunForward run_forward, RunGrad run_grad) {
  check_defined(op, x);
  return dispatch_op(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const xt::xarray<T>& in = x.node()->values<T>();
    xt::xarray<T> out = new_array<T>(op, in.shape());
    run_forward(in.data(), out.data(), in.size());
    return record<T>(op, std::move(out), {x}, [run_grad](BackwardContext<T>& ctx) {
      if (!ctx.needs_grad(0)) return;
      const auto target = ctx.grad_target(0);
      run_grad(ctx.grad().data(), ctx.input(0).data(), ctx.output().data(), target.data, ctx.grad().size(),
               !target.fresh);
    });
  });
}

// forward(x) -> values; grad(g, x, y) -> gradient of x (y is the output): xtensor
// expressions, evaluated chunk by chunk.
template <class Forward, class Grad>
Tensor unary_op(const char* op, const Tensor& x, Forward forward, Grad grad) {
  return unary_pointwise(
      op, x, [forward](const auto* in, auto* out, std::size_t n) { pointwise::assign(out, n, false, forward, in); },
      [grad](const auto* g, const auto* in, const auto* out, auto* dx, std::size_t n, bool add) {
        pointwise::assign(dx, n, add, grad, g, in, out);
      });
}

// forward(x, y, n) and grad(g, x, dx, n, add): fused kernels over contiguous elements (as
// kernels/gelu.hpp's), run on the pool in the same chunks.
template <class Forward, class Grad>
Tensor unary_kernel_op(const char* op, const Tensor& x, Forward forward, Grad grad) {
  return unary_pointwise(
      op, x,
      [forward](const auto* in, auto* out, std::size_t n) {
        parallel_for_chunks(n, kElementsPerChunk, pointwise::kWorkPerElement,
                            [&](std::size_t begin, std::size_t end) { forward(in + begin, out + begin, end - begin); });
      },
      [grad](const auto* g, const auto* in, const auto*, auto* dx, std::size_t n, bool add) {
        parallel_for_chunks(n, kElementsPerChunk, pointwise::kWorkPerElement, [&](std::size_t begin, std::size_t end) {
          grad(g + begin, in + begin, dx + begin, end - begin, add);
        });
      });
}

// forward(a, b) -> values; grad_a / grad_b(g, a, b, y) -> gradient at the broadcast shape.
// Operands of one shape are computed chunk by chunk on the pool; broadcasting ones whole.
template <class Forward, class GradA, class GradB>
Tensor binary_op(const char* op, const Tensor& a, const Tensor& b, Forward forward, GradA grad_a, GradB grad_b) {
  check_same_dtype(op, a, b);
  const Shape out_shape = broadcast_shapes(op, a.shape(), b.shape());
  return dispatch_op(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const xt::xarray<T>&x = a.node()->values<T>(), &y = b.node()->values<T>();
    if (x.shape() != y.shape()) {
      // The output is allocated (new_array's guard: it can be far larger than either
      // operand) before forward runs, which may itself make arrays of the broadcast shape.
      xt::xarray<T> out = new_array<T>(op, out_shape);
      xt::noalias(out) = forward(x, y);
      return record<T>(op, std::move(out), {a, b}, [grad_a, grad_b](BackwardContext<T>& ctx) {
        const auto& g = ctx.grad();
        const auto& x = ctx.input(0);
        const auto& y = ctx.input(1);
        const auto& out = ctx.output();
        // unbroadcast evaluates each gradient expression through new_array's guard.
        if (ctx.needs_grad(0)) ctx.accumulate(0, unbroadcast<T>(ctx.op(), grad_a(g, x, y, out), to_shape(x.shape())));
        if (ctx.needs_grad(1)) ctx.accumulate(1, unbroadcast<T>(ctx.op(), grad_b(g, x, y, out), to_shape(y.shape())));
      });
    }
    xt::xarray<T> out = new_array<T>(op, x.shape());
    pointwise::assign(out.data(), x.size(), false, forward, x.data(), y.data());
    return record<T>(op, std::move(out), {a, b}, [grad_a, grad_b](BackwardContext<T>& ctx) {
      const auto gradient_into = [&](std::size_t i, const auto& grad) {
        if (!ctx.needs_grad(i)) return;
        const auto target = ctx.grad_target(i);
        pointwise::assign(target.data, ctx.grad().size(), !target.fresh, grad, ctx.grad().data(), ctx.input(0).data(),
                          ctx.input(1).data(), ctx.output().data());
      };
      gradient_into(0, grad_a);
      gradient_into(1, grad_b);
    });
  });
}

}  // namespace xgrad
