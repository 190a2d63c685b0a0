// Layer and RMS normalization over the trailing axes, each one fused op with a row-loop
// kernel: the normalized axes are contiguous, so they are one row of their product.

#include <algorithm>
#include <cmath>
#include <limits>

#include "xgrad/autograd/kernels/layernorm.hpp"

#include "xgrad/autograd/ops.hpp"
#include "xgrad/autograd/record.hpp"

namespace xgrad {

namespace {

// x's shape must end in normalized_shape and each affine tensor must be that shape.
// Returns the row length (the product of the normalized axes).
std::size_t check_normalized(const char* op, const Tensor& x, const Shape& normalized_shape,
                             std::initializer_list<std::pair<const char*, const Tensor*>> affine) {
  check_defined(op, x);
  const Shape shape = x.shape();
  XGRAD_CHECK(!normalized_shape.empty(), op, "normalized_shape must have at least one axis, got [] for input ", shape);
  for (const auto& [name, tensor] : affine) {
    if (!tensor->defined()) continue;
    check_same_dtype(op, x, *tensor);
    XGRAD_CHECK(tensor->shape() == normalized_shape, op, name, " of shape ", tensor->shape(),
                " does not match the normalized shape ", normalized_shape, " of input ", shape);
  }
  XGRAD_CHECK(shape.size() >= normalized_shape.size() &&
                  std::equal(normalized_shape.begin(), normalized_shape.end(), shape.end() - normalized_shape.size()),
              op, "input ", shape, " does not end in the normalized shape ", normalized_shape);
  return numel(normalized_shape);
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_defined("layer_norm", x);
  XGRAD_CHECK(x.dim() != 0, "layer_norm", "needs at least one axis, got a scalar");
  // The affine tensors carry the normalized shape.
  const Tensor& affine = weight.defined() ? weight : bias;
  if (!affine.defined()) return layer_norm(x, Shape{x.shape().back()}, weight, bias, eps);
  const Shape shape = x.shape(), normalized = affine.shape();
  XGRAD_CHECK(shape.size() >= normalized.size() &&
                  std::equal(normalized.begin(), normalized.end(), shape.end() - normalized.size()),
              "layer_norm", &affine == &weight ? "weight" : "bias", " of shape ", normalized,
              " does not match the trailing axes of input ", shape);
  return layer_norm(x, normalized, weight, bias, eps);
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  const std::size_t d = check_normalized("layer_norm", x, normalized_shape, {{"weight", &weight}, {"bias", &bias}});
  XGRAD_CHECK(eps > 0.0 && std::isfinite(eps), "layer_norm", "eps must be finite and positive, got ", eps);
  const std::size_t rows = d ? x.numel() / d : 0;
  return dispatch_op(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    XGRAD_CHECK(static_cast<T>(eps) > T(0), "layer_norm", "eps ", eps, " rounds to 0 in ", x.dtype(),
                " (a constant row would divide by zero)");
    const auto data_of = [](const Tensor& t) { return t.defined() ? t.node()->values<T>().data() : nullptr; };
    xt::xarray<T> y = new_array<T>("layer_norm", x.node()->values<T>().shape());
    std::vector<T> mean(rows), rstd(rows);
    kernels::layer_norm_forward(data_of(x), data_of(weight), data_of(bias), y.data(), mean.data(), rstd.data(), rows, d,
                                static_cast<T>(eps));
    return record<T>("layer_norm", std::move(y), {x, weight, bias},
                     [mean = std::move(mean), rstd = std::move(rstd), rows, d](BackwardContext<T>& ctx) {
                       const T* w = ctx.has_input(1) ? ctx.input(1).data() : nullptr;
                       T* dw = ctx.needs_grad(1) ? ctx.grad_buffer(1).data() : nullptr;
                       T* db = ctx.needs_grad(2) ? ctx.grad_buffer(2).data() : nullptr;
                       xt::xarray<T> dx = new_array<T>(ctx.op(), ctx.input(0).shape());
                       kernels::layer_norm_backward(ctx.grad().data(), ctx.input(0).data(), w, mean.data(), rstd.data(),
                                                    dx.data(), dw, db, rows, d);
                       ctx.accumulate(0, std::move(dx));
                     });
  });
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, std::optional<double> eps) {
  const std::size_t d = check_normalized("rms_norm", x, normalized_shape, {{"weight", &weight}});
  XGRAD_CHECK(!eps || (*eps > 0.0 && std::isfinite(*eps)), "rms_norm", "eps must be finite and positive, got ",
              eps.value_or(0.0));
  const std::size_t rows = d ? x.numel() / d : 0;
  return dispatch_op(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T epsilon = eps ? static_cast<T>(*eps) : std::numeric_limits<T>::epsilon();
    XGRAD_CHECK(epsilon > T(0), "rms_norm", "eps ", eps.value_or(0.0), " rounds to 0 in ", x.dtype(),
                " (a zero row would divide by zero)");
    xt::xarray<T> y = new_array<T>("rms_norm", x.node()->values<T>().shape());
    std::vector<T> rstd(rows);
    const T* w = weight.defined() ? weight.node()->values<T>().data() : nullptr;
    kernels::rms_norm_forward(x.node()->values<T>().data(), w, y.data(), rstd.data(), rows, d, epsilon);
    return record<T>("rms_norm", std::move(y), {x, weight}, [rstd = std::move(rstd), rows, d](BackwardContext<T>& ctx) {
      const T* w = ctx.has_input(1) ? ctx.input(1).data() : nullptr;
      T* dw = ctx.needs_grad(1) ? ctx.grad_buffer(1).data() : nullptr;
      xt::xarray<T> dx = new_array<T>(ctx.op(), ctx.input(0).shape());
      kernels::rms_norm_backward(ctx.grad().data(), ctx.input(0).data(), w, rstd.data(), dx.data(), dw, rows, d);
      ctx.accumulate(0, std::move(dx));
    });
  });
}

}  // namespace xgrad
