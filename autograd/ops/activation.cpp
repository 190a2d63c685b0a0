// Activations, softmax over any axis, and dropout.

#include <cmath>
#include <numbers>

#include <xtensor/xmath.hpp>

#include "autograd/kernels/softmax.hpp"
#include "autograd/ops.hpp"
#include "autograd/random.hpp"
#include "autograd/ops/shape_util.hpp"

namespace xgrad {

Tensor tanh(const Tensor& x) {
  check_defined("tanh", x);
  return dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> y = xt::tanh(x.node()->values<T>());
    return record<T>("tanh", std::move(y), {x}, [](BackwardContext<T>& ctx) {
      const auto& y = ctx.output();
      ctx.accumulate(0, ctx.grad() * (T(1) - y * y));
    });
  });
}

Tensor sigmoid(const Tensor& x) {
  check_defined("sigmoid", x);
  return dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // 1 / (1 + exp(-x)) saturates cleanly: exp overflow gives 0, never NaN.
    xt::xarray<T> y = T(1) / (T(1) + xt::exp(-x.node()->values<T>()));
    return record<T>("sigmoid", std::move(y), {x}, [](BackwardContext<T>& ctx) {
      const auto& y = ctx.output();
      ctx.accumulate(0, ctx.grad() * y * (T(1) - y));
    });
  });
}

Tensor relu(const Tensor& x) {
  check_defined("relu", x);
  return dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> y = xt::maximum(x.node()->values<T>(), T(0));
    return record<T>("relu", std::move(y), {x}, [](BackwardContext<T>& ctx) {
      ctx.accumulate(0, xt::where(ctx.input(0) > T(0), ctx.grad(), T(0)));
    });
  });
}

Tensor gelu(const Tensor& x, bool approximate) {
  check_defined("gelu", x);
  return dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto& v = x.node()->values<T>();
    const T inv_sqrt2 = T(1) / std::numbers::sqrt2_v<T>;
    const T sqrt_2_over_pi = std::sqrt(T(2) / std::numbers::pi_v<T>);
    const T cubic = T(0.044715);
    if (approximate) {
      xt::xarray<T> y = T(0.5) * v * (T(1) + xt::tanh(sqrt_2_over_pi * (v + cubic * v * v * v)));
      return record<T>("gelu", std::move(y), {x}, [=](BackwardContext<T>& ctx) {
        const auto& u = ctx.input(0);
        const xt::xarray<T> t = xt::tanh(sqrt_2_over_pi * (u + cubic * u * u * u));
        ctx.accumulate(0, ctx.grad() * (T(0.5) * (T(1) + t) +
                                         T(0.5) * u * (T(1) - t * t) * sqrt_2_over_pi *
                                             (T(1) + T(3) * cubic * u * u)));
      });
    }
    // Exact: x * Phi(x); d/dx = Phi(x) + x * phi(x).
    xt::xarray<T> y = T(0.5) * v * (T(1) + xt::erf(v * inv_sqrt2));
    return record<T>("gelu", std::move(y), {x}, [=](BackwardContext<T>& ctx) {
      const auto& u = ctx.input(0);
      const T inv_sqrt_2pi = T(1) / std::sqrt(T(2) * std::numbers::pi_v<T>);
      ctx.accumulate(0, ctx.grad() * (T(0.5) * (T(1) + xt::erf(u * inv_sqrt2)) +
                                       u * inv_sqrt_2pi * xt::exp(T(-0.5) * u * u)));
    });
  });
}

namespace {

template <bool Log>
Tensor softmax_impl(const char* op, const Tensor& x, int axis) {
  check_defined(op, x);
  const Shape shape = x.shape();
  if (shape.empty()) fail(op, "needs at least one axis, got a scalar");
  const AxisBlocks b = blocks_around(shape, normalize_axis(op, axis, shape.size(), shape));
  return dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto& v = x.node()->values<T>();
    xt::xarray<T> y = xt::xarray<T>::from_shape(v.shape());
    if constexpr (Log)
      kernels::log_softmax_forward(v.data(), y.data(), b.outer, b.n, b.inner);
    else
      kernels::softmax_forward(v.data(), y.data(), b.outer, b.n, b.inner);
    return record<T>(op, std::move(y), {x}, [b](BackwardContext<T>& ctx) {
      xt::xarray<T> dx = xt::xarray<T>::from_shape(ctx.grad().shape());
      if constexpr (Log)
        kernels::log_softmax_backward(ctx.output().data(), ctx.grad().data(), dx.data(), b.outer, b.n, b.inner);
      else
        kernels::softmax_backward(ctx.output().data(), ctx.grad().data(), dx.data(), b.outer, b.n, b.inner);
      ctx.accumulate(0, std::move(dx));
    });
  });
}

}  // namespace

Tensor softmax(const Tensor& x, int axis) { return softmax_impl<false>("softmax", x, axis); }
Tensor log_softmax(const Tensor& x, int axis) { return softmax_impl<true>("log_softmax", x, axis); }

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  check_defined("dropout", x);
  if (!(p >= 0.0 && p < 1.0))
    fail("dropout", "probability p = " + std::to_string(p) + " is outside [0, 1)");
  if (!training || p == 0.0) return x;
  return dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto& v = x.node()->values<T>();
    const T scale = static_cast<T>(1.0 / (1.0 - p));
    xt::xarray<T> keep = xt::xarray<T>::from_shape(v.shape());
    for (T& k : keep) k = gen.uniform() >= p ? scale : T(0);
    xt::xarray<T> y = v * keep;
    return record<T>("dropout", std::move(y), {x}, [keep = std::move(keep)](BackwardContext<T>& ctx) {
      ctx.accumulate(0, ctx.grad() * keep);
    });
  });
}

}  // namespace xgrad
