// Activations, softmax over any axis, and dropout.

#include <cmath>

#include <xtensor/xmath.hpp>

#include "xgrad/autograd/kernels/gelu.hpp"
#include "xgrad/autograd/kernels/mask.hpp"
#include "xgrad/autograd/kernels/softmax.hpp"
#include "xgrad/autograd/ops.hpp"
#include "xgrad/autograd/ops/pointwise.hpp"
#include "xgrad/autograd/ops/shape_util.hpp"
#include "xgrad/autograd/random.hpp"

namespace xgrad {

Tensor tanh(const Tensor& x) {
  return unary_op(
      "tanh", x, [](const auto& v) { return xt::tanh(v); },
      [](const auto& g, const auto&, const auto& y) {
        using T = value_t<decltype(g)>;
        return g * (T(1) - y * y);
      });
}

Tensor sigmoid(const Tensor& x) {
  return unary_op(
      "sigmoid", x,
      [](const auto& v) {  // 1 / (1 + exp(-x)) saturates cleanly: exp overflow gives 0, never NaN
        using T = value_t<decltype(v)>;
        return T(1) / (T(1) + xt::exp(-v));
      },
      [](const auto& g, const auto&, const auto& y) {
        using T = value_t<decltype(g)>;
        return g * y * (T(1) - y);
      });
}

Tensor relu(const Tensor& x) {
  return unary_op(
      "relu", x,
      [](const auto& v) {  // NaN stays NaN (xt::maximum would give 0)
        using T = value_t<decltype(v)>;
        return xt::where(v < T(0), T(0), v);
      },
      [](const auto& g, const auto& v, const auto&) {
        using T = value_t<decltype(g)>;
        return xt::where(v > T(0), g, T(0));
      });
}

Tensor silu(const Tensor& x) {
  return unary_op(
      "silu", x,
      [](const auto& v) {
        using T = value_t<decltype(v)>;
        return xt::xarray<T>(v / (T(1) + xt::exp(-v)));
      },
      [](const auto& g, const auto& v, const auto&) {  // s (1 + x (1 - s)), s = sigmoid(x)
        using T = value_t<decltype(g)>;
        const xt::xarray<T> s = T(1) / (T(1) + xt::exp(-v));
        return xt::xarray<T>(g * s * (T(1) + v * (T(1) - s)));
      });
}

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  // With s = sigmoid(gate): d/dgate = up s (1 + gate (1 - s)), d/dup = gate s = silu(gate).
  return binary_op(
      "swiglu", gate, up,
      [](const auto& a, const auto& b) {
        using T = value_t<decltype(a)>;
        return a / (T(1) + xt::exp(-a)) * b;
      },
      [](const auto& g, const auto& a, const auto& b, const auto&) {
        using T = value_t<decltype(g)>;
        const xt::xarray<T> s = T(1) / (T(1) + xt::exp(-a));
        return xt::xarray<T>(g * b * s * (T(1) + a * (T(1) - s)));
      },
      [](const auto& g, const auto& a, const auto&, const auto&) {
        using T = value_t<decltype(g)>;
        return g * (a / (T(1) + xt::exp(-a)));
      });
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  XGRAD_CHECK(beta > 0.0 && std::isfinite(beta), "softplus", "beta ", beta, " must be finite and > 0");
  XGRAD_CHECK(!std::isnan(threshold), "softplus", "threshold must not be NaN");
  // log1p(exp(beta x)) / beta, and x itself where beta x > threshold (as PyTorch, which
  // also avoids the overflow of exp there).
  return unary_op(
      "softplus", x,
      [beta, threshold](const auto& v) {
        using T = value_t<decltype(v)>;
        const T b = static_cast<T>(beta), t = static_cast<T>(threshold);
        const xt::xarray<T> scaled = v * b;
        return xt::xarray<T>(xt::where(scaled > t, v, xt::log1p(xt::exp(scaled)) / b));
      },
      [beta, threshold](const auto& g, const auto& v, const auto&) {  // sigmoid(beta x)
        using T = value_t<decltype(g)>;
        const T b = static_cast<T>(beta), t = static_cast<T>(threshold);
        const xt::xarray<T> scaled = v * b;
        return xt::xarray<T>(xt::where(scaled > t, g, g / (T(1) + xt::exp(-scaled))));
      });
}

// Exact: x Phi(x), d/dx = Phi(x) + x phi(x); the tanh approximation: 0.5 x (1 + tanh(sqrt(2
// / pi) (x + 0.044715 x^3))). Each fused in one SIMD pass a way (kernels/gelu.hpp).
Tensor gelu(const Tensor& x, bool approximate) {
  return unary_kernel_op(
      "gelu", x,
      [approximate](const auto* in, auto* out, std::size_t n) { kernels::gelu_forward(in, out, n, approximate); },
      [approximate](const auto* g, const auto* u, auto* dx, std::size_t n, bool add) {
        kernels::gelu_backward(g, u, dx, n, approximate, add);
      });
}

namespace {

template <bool Log>
Tensor softmax_impl(const char* op, const Tensor& x, int axis) {
  check_defined(op, x);
  const Shape shape = x.shape();
  XGRAD_CHECK(!shape.empty(), op, "needs at least one axis, got a scalar");
  AxisBlocks b = blocks_around(shape, normalize_axis(op, axis, shape.size(), shape));
  if (numel(shape) == 0) b.outer = 0;  // no rows: the kernels must not walk a long outer axis of nothing
  return dispatch_op(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto& v = x.node()->values<T>();
    xt::xarray<T> y = new_array<T>(op, v.shape());
    if constexpr (Log)
      kernels::log_softmax_forward(v.data(), y.data(), b.outer, b.n, b.inner);
    else
      kernels::softmax_forward(v.data(), y.data(), b.outer, b.n, b.inner);
    return record<T>(op, std::move(y), {x}, [b](BackwardContext<T>& ctx) {
      xt::xarray<T> dx = new_array<T>(ctx.op(), ctx.grad().shape());
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
  XGRAD_CHECK(p >= 0.0 && p < 1.0, "dropout", "probability p = ", p, " is outside [0, 1)");
  if (!training || p == 0.0) return x;
  return dispatch_op(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto& v = x.node()->values<T>();
    const T scale = static_cast<T>(1.0 / (1.0 - p));
    xt::xarray<T> keep = new_array<T>("dropout", v.shape());
    kernels::dropout_mask([&gen] { return gen.uniform(); }, p, scale, keep.size(), keep.data());
    xt::xarray<T> y = evaluate<T>("dropout", v * keep);
    return record<T>("dropout", std::move(y), {x},
                     [keep = std::move(keep)](BackwardContext<T>& ctx) { ctx.accumulate(0, ctx.grad() * keep); });
  });
}

}  // namespace xgrad
