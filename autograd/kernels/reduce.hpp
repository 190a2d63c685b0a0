#pragma once
// Reductions over any set of axes of a contiguous row-major array, without moving data:
// group i's elements sit at kept[i] + reduced[j] + k, for each run start reduced[j] and
// k < reduced_run (the trailing reduced axes are contiguous: one run, not an offset per
// element). Sums accumulate in double, so that float32 sums of millions of elements keep
// float32's precision (a float accumulator stops growing at 2^24 ones).

#include <cstddef>
#include <cstdint>
#include <vector>

namespace xgrad::kernels {

struct ReducePlan {
  std::vector<std::size_t> kept;     // offset of each output element's first input element
  std::vector<std::size_t> reduced;  // offsets within one reduced group where runs start
  std::size_t reduced_run = 1;       // contiguous elements from each (0: an empty axis)
  bool innermost_reduced = false;    // last axis reduced: groups are (partly) contiguous
};

ReducePlan make_reduce_plan(const std::vector<std::size_t>& shape, const std::vector<bool>& reduce_axis);

template <class T>
void sum_reduce(const T* x, const ReducePlan& plan, T* out);
// out[i] = max of group i; argmax[i] = offset (into x) of its first maximal element.
template <class T>
void max_reduce(const T* x, const ReducePlan& plan, T* out, std::size_t* argmax);

// The gradients of those: every element of group i gets grad[i] * scale (dx written
// whole; scale 1 for sum, 1 / group size for mean) ...
template <class T>
void sum_reduce_backward(const T* grad, const ReducePlan& plan, T scale, T* dx);
// ... and max's goes to each group's first maximal element: dx[argmax[i]] += grad[i].
template <class T>
void max_reduce_backward(const T* grad, const std::size_t* argmax, std::size_t n, T* dx);

// Each group's mean (into means) and its spread sum((x - mean)^2) / divisor, or the
// square root of that when `root` (stddev): two passes per group.
template <class T>
void variance_reduce(const T* x, const ReducePlan& plan, T divisor, bool root, T* means, T* out);
// dx (written whole) from grad and variance_reduce's out and means: 2 grad (x - mean) /
// divisor, or with `root` grad (x - mean) / (divisor out), 0 where out is 0 (a constant
// group: no direction is downhill).
template <class T>
void variance_reduce_backward(const T* x, const T* grad, const T* out, const T* means, const ReducePlan& plan,
                              T divisor, bool root, T* dx);

// Along the middle axis of a contiguous [outer, n, inner] array (n > 0), into
// found[o * inner + i]: the position of the first largest (max) or smallest element of
// each line; a NaN counts as the extreme, as in PyTorch.
template <class T>
void arg_extreme_along(const T* x, std::size_t outer, std::size_t n, std::size_t inner, bool max, std::int64_t* found);

// Running sums along the middle axis of a contiguous [outer, n, inner] array: forwards,
// or from the last position back when `reverse` (cumsum's gradient).
template <class T>
void running_sum(const T* x, T* out, std::size_t outer, std::size_t n, std::size_t inner, bool reverse);

}  // namespace xgrad::kernels
