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
#include <xtensor/xtensor.hpp>

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

// A broadcast whose repeated operand is smaller than this goes through xtensor's
// broadcasting whole: the block-by-block path evaluates one expression per block.
inline constexpr std::size_t kMinRepeatedBlock = 64;

// Elements [begin, end) of an operand's part in block `o` of a RowBroadcast: of its own
// block `o`, or of the repeated operand, which every block reads whole.
template <class T>
auto block_part(const T* data, bool repeated, std::size_t inner, std::size_t o, std::size_t begin, std::size_t end) {
  const std::size_t offset = repeated ? 0 : o * inner;
  return chunk(data, offset + begin, offset + end);
}

// Whether a binary op's gradient lambda is the identity: it returns the gradient it is
// given itself (declared `-> const auto&`), not an expression of it.
template <class Grad, class T>
constexpr bool returns_its_gradient =
    std::is_lvalue_reference_v<std::invoke_result_t<const Grad&, const xt::xarray<T>&, const xt::xarray<T>&,
                                                    const xt::xarray<T>&, const xt::xarray<T>&>>;

// body(o, begin, end) for elements [begin, end) of block o of a RowBroadcast, over the
// whole output in the pool's chunks (a chunk may hold the end of one block and the start
// of the next; a block may span chunks): fixed by the shape, whatever the thread count.
template <class Body>
void for_block_parts(const RowBroadcast& rows, Body&& body) {
  parallel_for_chunks(rows.outer * rows.inner, kElementsPerChunk, kWorkPerElement,
                      [&](std::size_t first, std::size_t last) {
                        for (std::size_t at = first; at < last;) {
                          const std::size_t o = at / rows.inner, begin = at % rows.inner;
                          const std::size_t end = std::min(rows.inner, begin + (last - at));
                          body(o, begin, end);
                          at += end - begin;
                        }
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

// binary_op where one operand repeats along the output's leading axes (RowBroadcast): the
// output and the other operand's gradient in the pool's chunks (for_block_parts); the
// repeated operand's gradient, the sum of its blocks' in block order and in double (as
// unbroadcast sums them), a range of its elements per task. Each element by the op's own expression, as
// for operands of one shape. A positional table's add had run on one thread: with the
// embedding's lookup, the pool's worker idled 4.5% of medium's bf16 step.
template <class T, class Forward, class GradA, class GradB>
Tensor row_broadcast_op(const char* op, const Tensor& a, const Tensor& b, const Shape& out_shape,
                        const RowBroadcast& rows, Forward forward, GradA grad_a, GradB grad_b) {
  using pointwise::block_part;
  using pointwise::chunk;
  const bool a_repeats = rows.repeated == 0, b_repeats = rows.repeated == 1;
  const T* x = a.node()->values<T>().data();
  const T* y = b.node()->values<T>().data();
  xt::xarray<T> out = new_array<T>(op, out_shape);
  pointwise::for_block_parts(rows, [&](std::size_t o, std::size_t begin, std::size_t end) {
    const std::size_t at = o * rows.inner;
    auto target = chunk(out.data(), at + begin, at + end);
    xt::noalias(target) = forward(block_part(x, a_repeats, rows.inner, o, begin, end),
                                  block_part(y, b_repeats, rows.inner, o, begin, end));
  });
  return record<T>(op, std::move(out), {a, b}, [rows, a_repeats, b_repeats, grad_a, grad_b](BackwardContext<T>& ctx) {
    const std::size_t inner = rows.inner;
    const T* gv = ctx.grad().data();
    const T* av = ctx.input(0).data();
    const T* bv = ctx.input(1).data();
    const T* outv = ctx.output().data();
    // use(grad(g, a, b, out)) over elements [begin, end) of block o, in one full expression:
    // the gradient's expression refers to the chunks made for it.
    const auto with_block_grad = [&](const auto& grad, std::size_t o, std::size_t begin, std::size_t end,
                                     const auto& use) {
      const std::size_t at = o * inner;
      use(grad(chunk(gv, at + begin, at + end), block_part(av, a_repeats, inner, o, begin, end),
               block_part(bv, b_repeats, inner, o, begin, end), chunk(outv, at + begin, at + end)));
    };
    const auto whole_grad = [&](std::size_t i, const auto& grad) {
      if (!ctx.needs_grad(i)) return;
      const auto target = ctx.grad_target(i);
      pointwise::for_block_parts(rows, [&](std::size_t o, std::size_t begin, std::size_t end) {
        auto part = chunk(target.data, o * inner + begin, o * inner + end);
        with_block_grad(grad, o, begin, end, [&](const auto& gradient) {
          if (target.fresh)
            xt::noalias(part) = gradient;
          else
            xt::noalias(part) += gradient;
        });
      });
    };
    const auto repeated_grad = [&](std::size_t i, const auto& grad) {
      if (!ctx.needs_grad(i)) return;
      // In double, as sum_reduce (unbroadcast's) sums: the same bits either way.
      xt::xarray<double> sum = zeros_array<double>(ctx.op(), ctx.input(i).shape());
      const std::size_t elements_per_task =
          std::max<std::size_t>(pointwise::kMinRepeatedBlock, kElementsPerChunk / rows.outer);
      parallel_for_chunks(inner, elements_per_task, pointwise::kWorkPerElement * static_cast<double>(rows.outer),
                          [&](std::size_t begin, std::size_t end) {
                            auto part = chunk(sum.data(), begin, end);
                            // Each block's gradient made in T first, as the expanded
                            // operand's is (added straight into doubles, xsimd would
                            // compute it in double), in an aligned buffer (where SIMD
                            // starts must not depend on an address).
                            xt::xtensor<T, 1> block = xt::empty<T>({end - begin});
                            for (std::size_t o = 0; o < rows.outer; ++o)
                              with_block_grad(grad, o, begin, end, [&](const auto& gradient) {
                                xt::noalias(block) = gradient;
                                xt::noalias(part) += block;
                              });
                          });
      if constexpr (std::is_same_v<T, double>)
        ctx.accumulate(i, std::move(sum));
      else
        ctx.accumulate(i, xt::cast<T>(sum));
    };
    if (a_repeats) {
      repeated_grad(0, grad_a);
      whole_grad(1, grad_b);
    } else {
      whole_grad(0, grad_a);
      repeated_grad(1, grad_b);
    }
  });
}

// forward(a, b) -> values; grad_a / grad_b(g, a, b, y) -> gradient at the broadcast shape.
// Operands of one shape are computed chunk by chunk on the pool, as are those where one
// repeats along the other's leading axes (row_broadcast_op); other broadcasts whole.
template <class Forward, class GradA, class GradB>
Tensor binary_op(const char* op, const Tensor& a, const Tensor& b, Forward forward, GradA grad_a, GradB grad_b) {
  check_same_dtype(op, a, b);
  const Shape out_shape = broadcast_shapes(op, a.shape(), b.shape());
  return dispatch_op(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const xt::xarray<T>&x = a.node()->values<T>(), &y = b.node()->values<T>();
    if (x.shape() != y.shape()) {
      if (const RowBroadcast rows = row_broadcast(a.shape(), b.shape(), out_shape);
          rows.repeated < 2 && rows.inner >= pointwise::kMinRepeatedBlock)
        return row_broadcast_op<T>(op, a, b, out_shape, rows, forward, grad_a, grad_b);
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
      // An input whose gradient is the output's own (its lambda returns g itself, as add's)
      // is written last, and takes the output's gradient where it can rather than copy it:
      // a residual add's backward had copied it twice.
      if constexpr (pointwise::returns_its_gradient<GradB, T>) {
        gradient_into(0, grad_a);
        if (!ctx.take_grad(1)) gradient_into(1, grad_b);
      } else if constexpr (pointwise::returns_its_gradient<GradA, T>) {
        gradient_into(1, grad_b);
        if (!ctx.take_grad(0)) gradient_into(0, grad_a);
      } else {
        gradient_into(0, grad_a);
        gradient_into(1, grad_b);
      }
    });
  });
}

}  // namespace xgrad
