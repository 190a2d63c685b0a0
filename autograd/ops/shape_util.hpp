#pragma once
// Internal shape helpers for ops: numpy broadcasting, "unbroadcast" (sums a gradient of
// the broadcast shape back to one input's shape), and the [outer, n, inner] view of an
// array around one axis that the row kernels take.

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

template <class T>
xt::xarray<T> unbroadcast(xt::xarray<T> grad, const Shape& target) {
  const Shape from = to_shape(grad.shape());
  if (from == target) return grad;
  const kernels::ReducePlan plan = kernels::make_reduce_plan(from, unbroadcast_axes(from, target));
  xt::xarray<T> out = xt::xarray<T>::from_shape(to_xshape<T>(target));
  kernels::sum_reduce(grad.data(), plan, out.data());
  return out;
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
