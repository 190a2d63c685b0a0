#include "xgrad/autograd/kernels/reduce.hpp"

#include <algorithm>

namespace xgrad::kernels {

namespace {

// Offsets of every multi-index over the axes where `select` is true, in row-major order
// (none when one of those axes is empty).
std::vector<std::size_t> offsets_over(const std::vector<std::size_t>& shape, const std::vector<std::size_t>& strides,
                                      const std::vector<bool>& select) {
  for (std::size_t axis = 0; axis < shape.size(); ++axis)
    if (select[axis] && shape[axis] == 0) return {};  // before a long axis would be walked for nothing
  std::vector<std::size_t> offsets{0};
  for (std::size_t axis = 0; axis < shape.size(); ++axis) {
    if (!select[axis] || shape[axis] == 1) continue;
    std::vector<std::size_t> next;
    next.reserve(offsets.size() * shape[axis]);
    for (std::size_t base : offsets)
      for (std::size_t k = 0; k < shape[axis]; ++k) next.push_back(base + k * strides[axis]);
    offsets = std::move(next);
  }
  return offsets;
}

}  // namespace

ReducePlan make_reduce_plan(const std::vector<std::size_t>& shape, const std::vector<bool>& reduce_axis) {
  std::vector<std::size_t> strides(shape.size());
  std::size_t stride = 1;
  for (std::size_t axis = shape.size(); axis-- > 0;) {
    strides[axis] = stride;
    stride *= shape[axis];
  }
  std::vector<bool> keep_axis(shape.size());
  for (std::size_t axis = 0; axis < shape.size(); ++axis) keep_axis[axis] = !reduce_axis[axis];
  ReducePlan plan;
  plan.kept = offsets_over(shape, strides, keep_axis);
  plan.reduced = offsets_over(shape, strides, reduce_axis);
  plan.innermost_reduced = !shape.empty() && reduce_axis.back();
  return plan;
}

template <class T>
void sum_reduce(const T* x, const ReducePlan& plan, T* out) {
  const std::size_t n_out = plan.kept.size();
  if (plan.innermost_reduced) {
    // Each group is a run of nearby elements: finish one group at a time.
    for (std::size_t i = 0; i < n_out; ++i) {
      const T* base = x + plan.kept[i];
      T acc = 0;
      for (std::size_t r : plan.reduced) acc += base[r];
      out[i] = acc;
    }
  } else {
    // Kept elements are the contiguous ones: sweep the input once, group by group.
    std::fill(out, out + n_out, T(0));
    for (std::size_t r : plan.reduced)
      for (std::size_t i = 0; i < n_out; ++i) out[i] += x[plan.kept[i] + r];
  }
}

template <class T>
void max_reduce(const T* x, const ReducePlan& plan, T* out, std::size_t* argmax) {
  for (std::size_t i = 0; i < plan.kept.size(); ++i) {
    std::size_t best = plan.kept[i] + plan.reduced[0];
    for (std::size_t r : plan.reduced) {
      const std::size_t at = plan.kept[i] + r;
      if (x[at] > x[best] || (x[at] != x[at] && x[best] == x[best])) best = at;  // the first NaN wins, as in PyTorch
    }
    out[i] = x[best];
    argmax[i] = best;
  }
}

template void sum_reduce<float>(const float*, const ReducePlan&, float*);
template void sum_reduce<double>(const double*, const ReducePlan&, double*);
template void max_reduce<float>(const float*, const ReducePlan&, float*, std::size_t*);
template void max_reduce<double>(const double*, const ReducePlan&, double*, std::size_t*);

}  // namespace xgrad::kernels
