// Cross-entropy over logits with class targets or class probabilities, PyTorch's options
// (reduction, class weights, label smoothing, the class axis). Only two numbers per row
// (max and log-sum of the shifted exponentials) are kept for backward; the softmax is
// recomputed there from the logits.

#include <cmath>
#include <numeric>
#include <optional>

#include "xgrad/autograd/kernels/softmax.hpp"
#include "xgrad/autograd/ops.hpp"
#include "xgrad/autograd/ops/shape_util.hpp"
#include "xgrad/autograd/record.hpp"

namespace xgrad {

namespace {

constexpr const char* kOp = "cross_entropy";

// The logits as rows of classes: the class axis moved last when it is not (a copy, as
// PyTorch's [N, C, d1, ...] layout needs), and the shape of one loss per row.
struct ClassRows {
  Tensor logits;  // [..., C]
  Shape row_shape;
  std::size_t rows = 0, classes = 0;
};

std::size_t class_axis_of(const Tensor& logits, int class_axis) {
  const Shape shape = logits.shape();
  XGRAD_CHECK(!shape.empty(), kOp, "logits must have a class axis, got a scalar");
  const std::size_t axis = normalize_axis(kOp, class_axis, shape.size(), shape);
  XGRAD_CHECK(shape[axis] > 0, kOp, "logits ", shape, " have no class along axis ", axis);
  return axis;
}

Tensor classes_last(const Tensor& t, std::size_t axis) {
  if (axis + 1 == t.dim()) return t;
  std::vector<int> order;
  for (std::size_t a = 0; a < t.dim(); ++a)
    if (a != axis) order.push_back(static_cast<int>(a));
  order.push_back(static_cast<int>(axis));
  return permute(t, order);
}

ClassRows class_rows(const Tensor& logits, std::size_t axis) {
  ClassRows r;
  r.logits = classes_last(logits, axis);
  const Shape shape = r.logits.shape();
  r.classes = shape.back();
  r.row_shape.assign(shape.begin(), shape.end() - 1);
  r.rows = numel(r.row_shape);
  return r;
}

// Per-class weights as values (1 for every class without `weight`), and their sum.
template <class T>
std::vector<T> class_weights(const Tensor& weight, std::size_t classes, DType dtype) {
  if (!weight.defined()) return std::vector<T>(classes, T(1));
  XGRAD_CHECK(weight.shape() == Shape{classes} && weight.dtype() == dtype, kOp, "weight ", weight.dtype(), " ",
              weight.shape(), " must be ", dtype, " [", classes, "] (one per class)");
  const T* w = weight.node()->values<T>().data();
  return std::vector<T>(w, w + classes);
}

void check_smoothing(double label_smoothing) {
  XGRAD_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, kOp, "label_smoothing ", label_smoothing,
              " must lie in [0, 1]");
}

// The reduced loss from per-row terms: `none` keeps one value per row.
template <class T>
xt::xarray<T> reduced(const std::vector<T>& per_row, Reduction reduction, const Shape& row_shape, T scale) {
  if (reduction == Reduction::none) {
    xt::xarray<T> out = xt::xarray<T>::from_shape(to_xshape<T>(row_shape));
    std::copy(per_row.begin(), per_row.end(), out.begin());
    return out;
  }
  xt::xarray<T> out = xt::xarray<T>::from_shape({});
  out() = std::accumulate(per_row.begin(), per_row.end(), T(0)) * scale;
  return out;
}

// The upstream gradient of row r: per row for `none`, else the scalar times `scale`.
template <class T>
T row_grad(const xt::xarray<T>& grad, Reduction reduction, std::size_t r, T scale) {
  return reduction == Reduction::none ? grad.data()[r] : grad() * scale;
}

}  // namespace

// Row r with target t, p = softmax(x_r), w the class weights (all 1 without weight):
//   nll_r    = -w_t log p_t                  (0 for an ignored target)
//   smooth_r = -sum_c w_c log p_c            (0 for an ignored target)
//   loss_r   = (1 - eps) nll_r + eps / C smooth_r
// mean divides by the counted targets' weight sum (their number without `weight`).
// d nll_r / dx = w_t (p - onehot(t)); d smooth_r / dx = p sum(w) - w.
Tensor cross_entropy(const Tensor& logits, const Indices& targets, const CrossEntropyOptions& options) {
  check_defined(kOp, logits);
  targets.check(kOp);
  check_smoothing(options.label_smoothing);
  const Shape shape = logits.shape();
  const std::size_t axis = class_axis_of(logits, options.class_axis);
  Shape expected = shape;
  expected.erase(expected.begin() + static_cast<std::ptrdiff_t>(axis));
  XGRAD_CHECK(targets.shape == expected, kOp, "targets of shape ", targets.shape, " do not match logits ", shape,
              " with classes on axis ", axis, " (expected targets ", expected, ")");
  for (std::size_t r = 0; r < targets.numel(); ++r) {
    const std::int64_t t = targets.values[r];
    XGRAD_CHECK(t == options.ignore_index || (t >= 0 && static_cast<std::size_t>(t) < shape[axis]), kOp, "target ", t,
                " at position ", r, " is outside [0, ", shape[axis], ") for logits ", shape);
  }
  const ClassRows rows = class_rows(logits, axis);
  const std::size_t classes = rows.classes, n = rows.rows;
  const Reduction reduction = options.reduction;
  const std::int64_t ignore = options.ignore_index;
  return dispatch(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const std::vector<T> w = class_weights<T>(options.weight, classes, logits.dtype());
    const T weight_sum = std::accumulate(w.begin(), w.end(), T(0));
    const T eps = static_cast<T>(options.label_smoothing), keep = T(1) - eps;
    const T* x = rows.logits.node()->values<T>().data();
    std::vector<T> max(n), log_sum(n), nll(n, T(0)), smooth(n, T(0));
    kernels::logsumexp_rows(x, max.data(), log_sum.data(), n, classes);
    T counted = 0;  // the weight of the counted targets
    for (std::size_t r = 0; r < n; ++r) {
      const std::int64_t t = targets.values[r];
      if (t == ignore) continue;
      const T* row = x + r * classes;
      nll[r] = w[t] * (log_sum[r] - (row[t] - max[r]));
      counted += w[t];
      if (eps == T(0)) continue;
      T total = 0;
      for (std::size_t c = 0; c < classes; ++c) total += w[c] * (log_sum[r] - (row[c] - max[r]));
      smooth[r] = total;
    }
    // mean's divisor (0 when nothing counts: no target to learn from).
    const T scale = reduction != Reduction::mean ? T(1) : counted != T(0) ? T(1) / counted : T(0);
    std::vector<T> per_row(n);
    for (std::size_t r = 0; r < n; ++r) per_row[r] = keep * nll[r] + eps / static_cast<T>(classes) * smooth[r];
    xt::xarray<T> loss = reduced(per_row, reduction, rows.row_shape, scale);
    return record<T>(kOp, std::move(loss), {rows.logits},
                     [max = std::move(max), log_sum = std::move(log_sum), targets = targets.values, w, weight_sum,
                      ignore, classes, reduction, keep, eps, scale](BackwardContext<T>& ctx) {
                       const T* x = ctx.input(0).data();
                       xt::xarray<T> dx = xt::xarray<T>::from_shape(ctx.input(0).shape());
                       for (std::size_t r = 0; r < targets.size(); ++r) {
                         T* d = dx.data() + r * classes;
                         const std::int64_t t = targets[r];
                         if (t == ignore) {
                           std::fill(d, d + classes, T(0));
                           continue;
                         }
                         const T g = row_grad(ctx.grad(), reduction, r, scale);
                         const T a = g * keep * w[t];                    // on w_t (p - onehot(t))
                         const T b = g * eps / static_cast<T>(classes);  // on p sum(w) - w
                         for (std::size_t c = 0; c < classes; ++c) {
                           const T p = std::exp((x[r * classes + c] - max[r]) - log_sum[r]);
                           d[c] = a * p + b * (p * weight_sum - w[c]);
                         }
                         d[t] -= a;
                       }
                       ctx.accumulate(0, std::move(dx));
                     });
  });
}

// Row r with target probabilities q, smoothed to q' = (1 - eps) q + eps / C:
//   loss_r = -sum_c w_c q'_c log p_c;  mean divides by the number of rows.
//   d loss_r / dx = p sum_c(w_c q'_c) - w q';  d loss_r / dq = -(1 - eps) w log p.
Tensor cross_entropy(const Tensor& logits, const Tensor& probabilities, const CrossEntropyOptions& options) {
  check_defined(kOp, logits);
  check_defined(kOp, probabilities);
  check_smoothing(options.label_smoothing);
  XGRAD_CHECK(probabilities.shape() == logits.shape() && probabilities.dtype() == logits.dtype(), kOp,
              "target probabilities ", probabilities.dtype(), " ", probabilities.shape(), " must match logits ",
              logits.dtype(), " ", logits.shape());
  const std::size_t axis = class_axis_of(logits, options.class_axis);
  const ClassRows rows = class_rows(logits, axis);
  const Tensor q = classes_last(probabilities, axis);
  const std::size_t classes = rows.classes, n = rows.rows;
  const Reduction reduction = options.reduction;
  return dispatch(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const std::vector<T> w = class_weights<T>(options.weight, classes, logits.dtype());
    const T eps = static_cast<T>(options.label_smoothing), keep = T(1) - eps;
    const T uniform = eps / static_cast<T>(classes);
    const T* x = rows.logits.node()->values<T>().data();
    const T* target = q.node()->values<T>().data();
    std::vector<T> max(n), log_sum(n), per_row(n);
    kernels::logsumexp_rows(x, max.data(), log_sum.data(), n, classes);
    for (std::size_t r = 0; r < n; ++r) {
      T total = 0;
      for (std::size_t c = 0; c < classes; ++c) {
        const T smoothed = keep * target[r * classes + c] + uniform;
        total += w[c] * smoothed * (log_sum[r] - (x[r * classes + c] - max[r]));
      }
      per_row[r] = total;
    }
    const T scale = reduction == Reduction::mean && n > 0 ? T(1) / static_cast<T>(n) : T(1);
    xt::xarray<T> loss = reduced(per_row, reduction, rows.row_shape, scale);
    return record<T>(kOp, std::move(loss), {rows.logits, q},
                     [max = std::move(max), log_sum = std::move(log_sum), w, classes, reduction, keep, uniform,
                      scale](BackwardContext<T>& ctx) {
                       const T* x = ctx.input(0).data();
                       const T* target = ctx.input(1).data();
                       const std::size_t n = max.size();
                       xt::xarray<T> dx = xt::xarray<T>::from_shape(ctx.input(0).shape());
                       xt::xarray<T> dq = xt::xarray<T>::from_shape(ctx.input(1).shape());
                       for (std::size_t r = 0; r < n; ++r) {
                         const T g = row_grad(ctx.grad(), reduction, r, scale);
                         const std::size_t at = r * classes;
                         T mass = 0;  // sum_c w_c q'_c
                         for (std::size_t c = 0; c < classes; ++c) mass += w[c] * (keep * target[at + c] + uniform);
                         for (std::size_t c = 0; c < classes; ++c) {
                           const T log_p = (x[at + c] - max[r]) - log_sum[r];
                           dx.data()[at + c] = g * (std::exp(log_p) * mass - w[c] * (keep * target[at + c] + uniform));
                           dq.data()[at + c] = -g * keep * w[c] * log_p;
                         }
                       }
                       ctx.accumulate(0, std::move(dx));
                       ctx.accumulate(1, std::move(dq));
                     });
  });
}

}  // namespace xgrad
