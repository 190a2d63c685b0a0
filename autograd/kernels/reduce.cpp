#include "xgrad/autograd/kernels/reduce.hpp"

#include <algorithm>
#include <cmath>

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
  // The trailing reduced axes (past size-1 kept ones) are one contiguous run.
  std::vector<bool> run_starts = reduce_axis;
  std::size_t run = 1;
  for (std::size_t axis = shape.size(); axis-- > 0 && (reduce_axis[axis] || shape[axis] == 1);) {
    run *= shape[axis];
    run_starts[axis] = false;
  }
  ReducePlan plan;
  plan.kept = offsets_over(shape, strides, keep_axis);
  plan.reduced = run == 0 ? std::vector<std::size_t>{} : offsets_over(shape, strides, run_starts);
  plan.reduced_run = run;
  plan.innermost_reduced = !shape.empty() && reduce_axis.back();
  return plan;
}

namespace {

// f(offset) for every element of one group, in row-major order.
template <class F>
void for_each_reduced(const ReducePlan& plan, F&& f) {
  for (std::size_t start : plan.reduced)
    for (std::size_t k = 0; k < plan.reduced_run; ++k) f(start + k);
}

}  // namespace

template <class T>
void sum_reduce(const T* x, const ReducePlan& plan, T* out) {
  const std::size_t n_out = plan.kept.size();
  if (plan.innermost_reduced) {
    // Each group is a run of nearby elements: finish one group at a time.
    for (std::size_t i = 0; i < n_out; ++i) {
      const T* base = x + plan.kept[i];
      double total = 0;
      for_each_reduced(plan, [&](std::size_t r) { total += base[r]; });
      out[i] = static_cast<T>(total);
    }
  } else {
    // Kept elements are the contiguous ones: sweep the input once, group by group.
    std::vector<double> totals(n_out, 0.0);
    for_each_reduced(plan, [&](std::size_t r) {
      for (std::size_t i = 0; i < n_out; ++i) totals[i] += x[plan.kept[i] + r];
    });
    std::copy(totals.begin(), totals.end(), out);
  }
}

template <class T>
void max_reduce(const T* x, const ReducePlan& plan, T* out, std::size_t* argmax) {
  for (std::size_t i = 0; i < plan.kept.size(); ++i) {
    std::size_t best = plan.kept[i] + plan.reduced[0];
    for_each_reduced(plan, [&](std::size_t r) {
      const std::size_t at = plan.kept[i] + r;
      if (x[at] > x[best] || (x[at] != x[at] && x[best] == x[best])) best = at;  // the first NaN wins, as in PyTorch
    });
    out[i] = x[best];
    argmax[i] = best;
  }
}

template <class T>
void sum_reduce_backward(const T* grad, const ReducePlan& plan, T scale, T* dx) {
  for (std::size_t i = 0; i < plan.kept.size(); ++i)
    for_each_reduced(plan, [&](std::size_t offset) { dx[plan.kept[i] + offset] = grad[i] * scale; });
}

template <class T>
void max_reduce_backward(const T* grad, const std::size_t* argmax, std::size_t n, T* dx) {
  for (std::size_t i = 0; i < n; ++i) dx[argmax[i]] += grad[i];
}

template <class T>
void variance_reduce(const T* x, const ReducePlan& plan, T divisor, bool root, T* means, T* out) {
  const double count = static_cast<double>(plan.reduced.size() * plan.reduced_run);
  for (std::size_t i = 0; i < plan.kept.size(); ++i) {
    const T* base = x + plan.kept[i];
    double total = 0;
    for_each_reduced(plan, [&](std::size_t offset) { total += base[offset]; });
    const double mean = total / count;
    double squares = 0;
    for_each_reduced(plan, [&](std::size_t offset) {
      const double d = base[offset] - mean;
      squares += d * d;
    });
    means[i] = static_cast<T>(mean);
    out[i] = static_cast<T>(root ? std::sqrt(squares / divisor) : squares / divisor);
  }
}

template <class T>
void variance_reduce_backward(const T* x, const T* grad, const T* out, const T* means, const ReducePlan& plan,
                              T divisor, bool root, T* dx) {
  for (std::size_t i = 0; i < plan.kept.size(); ++i) {
    T scale = root ? (out[i] > T(0) ? grad[i] / (divisor * out[i]) : T(0)) : T(2) * grad[i] / divisor;
    for_each_reduced(plan, [&](std::size_t offset) {
      const std::size_t at = plan.kept[i] + offset;
      dx[at] = scale * (x[at] - means[i]);
    });
  }
}

template <class T>
void arg_extreme_along(const T* x, std::size_t outer, std::size_t n, std::size_t inner, bool max, std::int64_t* found) {
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t in = 0; in < inner; ++in) {
      const T* row = x + o * n * inner + in;
      std::size_t best = 0;
      for (std::size_t j = 1; j < n && !std::isnan(row[best * inner]); ++j) {
        const T candidate = row[j * inner];
        if (std::isnan(candidate) || (max ? candidate > row[best * inner] : candidate < row[best * inner])) best = j;
      }
      found[o * inner + in] = static_cast<std::int64_t>(best);
    }
}

template <class T>
void running_sum(const T* x, T* out, std::size_t outer, std::size_t n, std::size_t inner, bool reverse) {
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t i = 0; i < inner; ++i) {
      double total = 0;  // as sum_reduce's
      for (std::size_t step = 0; step < n; ++step) {
        const std::size_t j = reverse ? n - 1 - step : step;
        const std::size_t at = (o * n + j) * inner + i;
        out[at] = static_cast<T>(total += x[at]);
      }
    }
}

template void sum_reduce<float>(const float*, const ReducePlan&, float*);
template void sum_reduce<double>(const double*, const ReducePlan&, double*);
template void max_reduce<float>(const float*, const ReducePlan&, float*, std::size_t*);
template void max_reduce<double>(const double*, const ReducePlan&, double*, std::size_t*);
template void sum_reduce_backward<float>(const float*, const ReducePlan&, float, float*);
template void sum_reduce_backward<double>(const double*, const ReducePlan&, double, double*);
template void max_reduce_backward<float>(const float*, const std::size_t*, std::size_t, float*);
template void max_reduce_backward<double>(const double*, const std::size_t*, std::size_t, double*);
template void variance_reduce<float>(const float*, const ReducePlan&, float, bool, float*, float*);
template void variance_reduce<double>(const double*, const ReducePlan&, double, bool, double*, double*);
template void variance_reduce_backward<float>(const float*, const float*, const float*, const float*, const ReducePlan&,
                                              float, bool, float*);
template void variance_reduce_backward<double>(const double*, const double*, const double*, const double*,
                                               const ReducePlan&, double, bool, double*);
template void arg_extreme_along<float>(const float*, std::size_t, std::size_t, std::size_t, bool, std::int64_t*);
template void arg_extreme_along<double>(const double*, std::size_t, std::size_t, std::size_t, bool, std::int64_t*);
template void running_sum<float>(const float*, float*, std::size_t, std::size_t, std::size_t, bool);
template void running_sum<double>(const double*, double*, std::size_t, std::size_t, std::size_t, bool);

}  // namespace xgrad::kernels
