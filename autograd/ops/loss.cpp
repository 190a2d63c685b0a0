// Cross-entropy over logits with integer targets. Only two numbers per row (max and
// log-sum of the shifted exponentials) are kept for backward; the softmax is recomputed
// there from the logits.

#include <cmath>

#include "xgrad/autograd/kernels/softmax.hpp"
#include "xgrad/autograd/ops.hpp"
#include "xgrad/autograd/record.hpp"

namespace xgrad {

Tensor cross_entropy(const Tensor& logits, const Indices& targets, std::int64_t ignore_index) {
  check_defined("cross_entropy", logits);
  targets.check("cross_entropy");
  const Shape shape = logits.shape();
  XGRAD_CHECK(!shape.empty(), "cross_entropy", "logits must have a class axis, got a scalar");
  const std::size_t classes = shape.back();
  const Shape row_shape(shape.begin(), shape.end() - 1);
  XGRAD_CHECK(targets.shape == row_shape, "cross_entropy", "targets of shape ", targets.shape, " do not match logits ",
              shape, " (expected targets ", row_shape, ")");
  std::size_t counted = 0;
  for (std::size_t r = 0; r < targets.numel(); ++r) {
    const std::int64_t t = targets.values[r];
    if (t == ignore_index) continue;
    XGRAD_CHECK(t >= 0 && static_cast<std::size_t>(t) < classes, "cross_entropy", "target ", t, " at position ", r,
                " is outside [0, ", classes, ") for logits ", shape);
    ++counted;
  }
  const std::size_t rows = targets.numel();
  return dispatch(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.node()->values<T>().data();
    std::vector<T> max(rows), log_sum(rows);
    kernels::logsumexp_rows(x, max.data(), log_sum.data(), rows, classes);
    T total = 0;  // sum of -log_softmax(x)[target] = log_sum - (x[target] - max)
    for (std::size_t r = 0; r < rows; ++r)
      if (targets.values[r] != ignore_index) total += log_sum[r] - (x[r * classes + targets.values[r]] - max[r]);
    // Every target ignored: nothing to learn from, so 0 with zero gradient.
    const T inv_count = counted ? T(1) / static_cast<T>(counted) : T(0);
    xt::xarray<T> loss = xt::xarray<T>::from_shape({});
    loss() = total * inv_count;
    return record<T>("cross_entropy", std::move(loss), {logits},
                     [max = std::move(max), log_sum = std::move(log_sum), targets = targets.values, ignore_index,
                      classes, inv_count](BackwardContext<T>& ctx) {
                       // d loss / d x[r, c] = (softmax(x)[r, c] - [c == target]) / count
                       const T scale = ctx.grad()() * inv_count;
                       const T* x = ctx.input(0).data();
                       xt::xarray<T> dx = xt::xarray<T>::from_shape(ctx.input(0).shape());
                       T* d = dx.data();
                       for (std::size_t r = 0; r < targets.size(); ++r) {
                         T* row = d + r * classes;
                         if (targets[r] == ignore_index) {
                           std::fill(row, row + classes, T(0));
                           continue;
                         }
                         for (std::size_t c = 0; c < classes; ++c)
                           row[c] = scale * std::exp((x[r * classes + c] - max[r]) - log_sum[r]);
                         row[targets[r]] -= scale;
                       }
                       ctx.accumulate(0, std::move(dx));
                     });
  });
}

}  // namespace xgrad
