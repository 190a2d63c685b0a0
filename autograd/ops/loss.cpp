// Cross-entropy over logits with class targets or class probabilities, PyTorch's options
// (reduction, class weights, label smoothing, the class axis). Only two numbers per row
// (max and log-sum of the shifted exponentials) are kept for backward; the softmax is
// recomputed there from the logits.

#include <numeric>
#include <optional>

#include "xgrad/autograd/kernels/loss.hpp"
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
    xt::xarray<T> out = new_array<T>(kOp, row_shape);
    std::copy(per_row.begin(), per_row.end(), out.begin());
    return out;
  }
  xt::xarray<T> out = new_array<T>(kOp, Shape{});
  out() = static_cast<T>(std::accumulate(per_row.begin(), per_row.end(), 0.0) * scale);  // as sum's, in double
  return out;
}

// The upstream gradient of each row: per row for `none`, else the scalar times `scale`.
template <class T>
kernels::RowGrad<T> row_grad(const xt::xarray<T>& grad, Reduction reduction, T scale) {
  return {grad.data(), reduction == Reduction::none, scale};
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
  return dispatch_op(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const std::vector<T> w = class_weights<T>(options.weight, classes, logits.dtype());
    const T weight_sum = std::accumulate(w.begin(), w.end(), T(0));
    const T eps = static_cast<T>(options.label_smoothing), keep = T(1) - eps;
    const T* x = rows.logits.node()->values<T>().data();
    std::vector<T> max(n), log_sum(n), per_row(n);
    kernels::logsumexp_rows(x, max.data(), log_sum.data(), n, classes);
    const T counted =
        kernels::cross_entropy_forward<T>({x, max.data(), log_sum.data(), n, classes}, targets.values.data(), ignore,
                                          w.data(), keep, eps, per_row.data());
    // mean's divisor (0 when nothing counts: no target to learn from).
    const T scale = reduction != Reduction::mean ? T(1) : counted != T(0) ? T(1) / counted : T(0);
    xt::xarray<T> loss = reduced(per_row, reduction, rows.row_shape, scale);
    return record<T>(kOp, std::move(loss), {rows.logits},
                     [max = std::move(max), log_sum = std::move(log_sum), targets = targets.values, w, weight_sum,
                      ignore, classes, reduction, keep, eps, scale](BackwardContext<T>& ctx) {
                       xt::xarray<T> dx = new_array<T>(ctx.op(), ctx.input(0).shape());
                       kernels::cross_entropy_backward<T>(
                           {ctx.input(0).data(), max.data(), log_sum.data(), targets.size(), classes}, targets.data(),
                           ignore, w.data(), weight_sum, keep, eps, row_grad(ctx.grad(), reduction, scale), dx.data());
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
  return dispatch_op(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const std::vector<T> w = class_weights<T>(options.weight, classes, logits.dtype());
    const T eps = static_cast<T>(options.label_smoothing), keep = T(1) - eps;
    const T uniform = eps / static_cast<T>(classes);
    const T* x = rows.logits.node()->values<T>().data();
    const T* target = q.node()->values<T>().data();
    std::vector<T> max(n), log_sum(n), per_row(n);
    kernels::logsumexp_rows(x, max.data(), log_sum.data(), n, classes);
    kernels::cross_entropy_probabilities_forward<T>({x, max.data(), log_sum.data(), n, classes}, target, w.data(), keep,
                                                    uniform, per_row.data());
    const T scale = reduction == Reduction::mean && n > 0 ? T(1) / static_cast<T>(n) : T(1);
    xt::xarray<T> loss = reduced(per_row, reduction, rows.row_shape, scale);
    return record<T>(kOp, std::move(loss), {rows.logits, q},
                     [max = std::move(max), log_sum = std::move(log_sum), w, classes, reduction, keep, uniform,
                      scale](BackwardContext<T>& ctx) {
                       xt::xarray<T> dx = new_array<T>(ctx.op(), ctx.input(0).shape());
                       xt::xarray<T> dq = new_array<T>(ctx.op(), ctx.input(1).shape());
                       kernels::cross_entropy_probabilities_backward<T>(
                           {ctx.input(0).data(), max.data(), log_sum.data(), max.size(), classes}, ctx.input(1).data(),
                           w.data(), keep, uniform, row_grad(ctx.grad(), reduction, scale), dx.data(), dq.data());
                       ctx.accumulate(0, std::move(dx));
                       ctx.accumulate(1, std::move(dq));
                     });
  });
}

}  // namespace xgrad
