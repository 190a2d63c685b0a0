// Layer normalization over the last axis, one fused op with a row-loop kernel.

#include <cmath>
#include "xgrad/autograd/kernels/layernorm.hpp"

#include "xgrad/autograd/ops.hpp"
#include "xgrad/autograd/record.hpp"

namespace xgrad {

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_defined("layer_norm", x);
  const Shape shape = x.shape();
  XGRAD_CHECK(!shape.empty(), "layer_norm", "needs at least one axis, got a scalar");
  const std::size_t d = shape.back();
  for (const Tensor* affine : {&weight, &bias}) {
    if (!affine->defined()) continue;
    check_same_dtype("layer_norm", x, *affine);
    XGRAD_CHECK(affine->shape() == Shape{d}, "layer_norm", affine == &weight ? "weight" : "bias", " of shape ",
                affine->shape(), " does not match the normalized axis of ", shape, " (expected [", d, "])");
  }
  XGRAD_CHECK(eps > 0.0 && std::isfinite(eps), "layer_norm", "eps must be finite and positive, got ", eps);
  const std::size_t rows = d ? numel(shape) / d : 0;
  return dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    XGRAD_CHECK(static_cast<T>(eps) > T(0), "layer_norm", "eps ", eps, " rounds to 0 in ", x.dtype(),
                " (a constant row would divide by zero)");
    const auto data_of = [](const Tensor& t) { return t.defined() ? t.node()->values<T>().data() : nullptr; };
    xt::xarray<T> y = xt::xarray<T>::from_shape(x.node()->values<T>().shape());
    std::vector<T> mean(rows), rstd(rows);
    kernels::layer_norm_forward(data_of(x), data_of(weight), data_of(bias), y.data(), mean.data(), rstd.data(), rows, d,
                                static_cast<T>(eps));
    return record<T>("layer_norm", std::move(y), {x, weight, bias},
                     [mean = std::move(mean), rstd = std::move(rstd), rows, d](BackwardContext<T>& ctx) {
                       const T* w = ctx.has_input(1) ? ctx.input(1).data() : nullptr;
                       T* dw = ctx.needs_grad(1) ? ctx.grad_buffer(1).data() : nullptr;
                       T* db = ctx.needs_grad(2) ? ctx.grad_buffer(2).data() : nullptr;
                       xt::xarray<T> dx = xt::xarray<T>::from_shape(ctx.input(0).shape());
                       kernels::layer_norm_backward(ctx.grad().data(), ctx.input(0).data(), w, mean.data(), rstd.data(),
                                                    dx.data(), dw, db, rows, d);
                       ctx.accumulate(0, std::move(dx));
                     });
  });
}

}  // namespace xgrad
