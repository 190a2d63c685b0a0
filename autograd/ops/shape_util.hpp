#pragma once
// Internal shape helpers for ops: numpy broadcasting, "unbroadcast" (sums a gradient of
// the broadcast shape back to one input's shape), and the [outer, n, inner] view of an
// array around one axis that the row kernels take.

#include <type_traits>

#include "xgrad/autograd/kernels/reduce.hpp"
#include "xgrad/autograd/record.hpp"

namespace xgrad {

// The shape both operands broadcast to; throws naming the op and both shapes otherwise.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);

// Offsets of each batch's matrix (matrix_size elements) inside a source whose batch
// shape broadcasts to out_batch: a broadcast axis contributes stride 0.
std::vector<std::size_t> batch_offsets(const Shape& source_batch, const Shape& out_batch, std::size_t matrix_size);

// The axes of `from` that must be summed to get back to `to` (to broadcasts to from).
std::vector<bool> unbroadcast_axes(const Shape& from, const Shape& to);

// A broadcast of two operands where one has the output's shape and the other (`repeated`:
// 0 or 1) repeats along the output's leading axes, as a bias or a positional table does:
// its shape, leading 1s aside, is the output's trailing axes. The output is then `outer`
// blocks of `inner` elements, each pairing a block of the first operand with all of the
// second. `repeated` is 2 for any other pair of shapes.
struct RowBroadcast {
  std::size_t repeated = 2, inner = 0, outer = 0;
};
RowBroadcast row_broadcast(const Shape& a, const Shape& b, const Shape& out);

namespace detail {
template <class T>
xt::xarray<T> summed_to(const char* op, const xt::xarray<T>& grad, const Shape& from, const Shape& target) {
  const kernels::ReducePlan plan = kernels::make_reduce_plan(from, unbroadcast_axes(from, target));
  xt::xarray<T> out = new_array<T>(op, target);
  kernels::sum_reduce(grad.data(), plan, out.data());
  return out;
}
}  // namespace detail

// A gradient of the broadcast shape summed back to `target` (`op` names the new arrays).
// `grad` is an array or any expression: an array handed over (std::move) is taken, and
// returned as it is when it has the target's shape already (else freed here once summed);
// an array lent (const&) is summed where it lies, copied only when it has the target's
// shape; any other expression is evaluated first (evaluate: through new_array's guard).
template <class T, class E>
xt::xarray<T> unbroadcast(const char* op, E&& grad, const Shape& target) {
  if constexpr (std::is_same_v<E, xt::xarray<T>>) {
    xt::xarray<T> owned = std::move(grad);
    const Shape from = to_shape(owned.shape());
    if (from == target) return owned;
    return detail::summed_to<T>(op, owned, from, target);
  } else if constexpr (std::is_same_v<std::remove_cvref_t<E>, xt::xarray<T>>) {
    const Shape from = to_shape(grad.shape());
    if (from == target) return evaluate<T>(op, grad);
    return detail::summed_to<T>(op, grad, from, target);
  } else {
    return unbroadcast<T>(op, evaluate<T>(op, grad), target);
  }
}

struct AxisBlocks {
  std::size_t outer = 1, n = 1, inner = 1;
};

inline AxisBlocks blocks_around(const Shape& shape, std::size_t axis) {
  AxisBlocks b;
  for (std::size_t i = 0; i < axis; ++i) b.outer *= shape[i];
  b.n = shape[axis];
  for (std::size_t i = axis + 1; i < shape.size(); ++i) b.inner *= shape[i];
  return b;
}

}  // namespace xgrad
