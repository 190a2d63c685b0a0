// Elementwise arithmetic, casts, comparisons and selection. Binary ops broadcast; each
// gradient is computed at the broadcast shape and summed back to its input's shape.

#include <cmath>
#include <limits>
#include <numbers>
#include <optional>

#include <xtensor/xmath.hpp>
#include <xtensor/xoperation.hpp>

#include "xgrad/autograd/kernels/indexing.hpp"
#include "xgrad/autograd/kernels/mask.hpp"
#include "xgrad/autograd/ops.hpp"
#include "xgrad/autograd/ops/pointwise.hpp"
#include "xgrad/autograd/ops/shape_util.hpp"

namespace xgrad {

namespace {

// Comparisons: 1 where true, 0 where false; never part of the graph.
template <class Compare>
Tensor compare_op(const char* op, const Tensor& a, const Tensor& b, Compare compare) {
  check_same_dtype(op, a, b);
  broadcast_shapes(op, a.shape(), b.shape());
  return dispatch_op(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = evaluate<T>(op, xt::cast<T>(compare(a.node()->values<T>(), b.node()->values<T>())));
    return make_leaf(std::move(out));
  });
}

// A comparison against a scalar: the tensor form against a scalar tensor of a's dtype.
Tensor against_scalar(const char* op, Tensor (*compare)(const Tensor&, const Tensor&), const Tensor& a, double s) {
  check_defined(op, a);
  return compare(a, Tensor::scalar(s, a.dtype()));
}

// The mask's truth values (nonzero = true), whatever its dtype, broadcast to `shape`.
std::vector<std::uint8_t> truth_at(const Tensor& mask, const Shape& shape) {
  const std::vector<std::size_t> at = batch_offsets(mask.shape(), shape, 1);
  std::vector<std::uint8_t> truth(at.size());
  std::visit([&](const auto& m) { kernels::nonzero_at(m.data(), at.data(), at.size(), truth.data()); },
             *mask.node()->value);
  return truth;
}

}  // namespace

// A gradient that is the upstream one itself is returned as a reference to it, not a copy:
// unbroadcast then sums it where it lies (and copies it, through evaluate, only to keep it).
Tensor add(const Tensor& a, const Tensor& b) {
  return binary_op(
      "add", a, b, [](const auto& x, const auto& y) { return x + y; },
      [](const auto& g, const auto&, const auto&, const auto&) -> const auto& { return g; },
      [](const auto& g, const auto&, const auto&, const auto&) -> const auto& { return g; });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  return binary_op(
      "sub", a, b, [](const auto& x, const auto& y) { return x - y; },
      [](const auto& g, const auto&, const auto&, const auto&) -> const auto& { return g; },
      [](const auto& g, const auto&, const auto&, const auto&) { return -g; });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  return binary_op(
      "mul", a, b, [](const auto& x, const auto& y) { return x * y; },
      [](const auto& g, const auto&, const auto& y, const auto&) { return g * y; },
      [](const auto& g, const auto& x, const auto&, const auto&) { return g * x; });
}

Tensor div(const Tensor& a, const Tensor& b) {
  return binary_op(
      "div", a, b, [](const auto& x, const auto& y) { return x / y; },
      [](const auto& g, const auto&, const auto& y, const auto&) { return g / y; },
      [](const auto& g, const auto&, const auto& y, const auto& out) { return -g * out / y; });
}

Tensor pow(const Tensor& base, const Tensor& exponent) {
  return binary_op(
      "pow", base, exponent, [](const auto& x, const auto& e) { return xt::pow(x, e); },
      // As PyTorch: no gradient where the exponent is 0 (not 0 * 0^-1 = NaN at x = 0), and
      // none to the exponent where x is 0 and the exponent >= 0 (not 0 * log 0).
      [](const auto& g, const auto& x, const auto& e, const auto&) {
        using T = value_t<decltype(g)>;
        return g * e * xt::pow(x, xt::where(xt::equal(e, T(0)), T(0), e - T(1)));
      },
      [](const auto& g, const auto& x, const auto& e, const auto& out) {
        using T = value_t<decltype(g)>;
        return g * out * xt::log(xt::where(xt::equal(x, T(0)) && e >= T(0), T(1), x));
      });
}

Tensor neg(const Tensor& x) {
  return unary_op(
      "neg", x, [](const auto& v) { return -v; }, [](const auto& g, const auto&, const auto&) { return -g; });
}

Tensor add(const Tensor& x, double s) {
  return unary_op(
      "add_scalar", x, [s](const auto& v) { return v + static_cast<value_t<decltype(v)>>(s); },
      [](const auto& g, const auto&, const auto&) { return g; });
}

Tensor mul(const Tensor& x, double s) {
  return unary_op(
      "mul_scalar", x, [s](const auto& v) { return v * static_cast<value_t<decltype(v)>>(s); },
      [s](const auto& g, const auto&, const auto&) { return g * static_cast<value_t<decltype(g)>>(s); });
}

Tensor rsub(double s, const Tensor& x) {
  return unary_op(
      "rsub_scalar", x, [s](const auto& v) { return static_cast<value_t<decltype(v)>>(s) - v; },
      [](const auto& g, const auto&, const auto&) { return -g; });
}

Tensor rdiv(double s, const Tensor& x) {
  return unary_op(
      "rdiv_scalar", x, [s](const auto& v) { return static_cast<value_t<decltype(v)>>(s) / v; },
      [](const auto& g, const auto& v, const auto& out) { return -g * out / v; });
}

Tensor pow(const Tensor& x, double exponent) {
  return unary_op(
      "pow_scalar", x,
      [exponent](const auto& v) {
        using T = value_t<decltype(v)>;
        return xt::pow(v, static_cast<T>(exponent));
      },
      [exponent](const auto& g, const auto& v, const auto&) {
        using T = value_t<decltype(g)>;  // exponent 0: gradient 0, also at v = 0 (as PyTorch)
        return g * static_cast<T>(exponent) * xt::pow(v, static_cast<T>(exponent == 0 ? 0 : exponent - 1));
      });
}

Tensor exp(const Tensor& x) {
  return unary_op(
      "exp", x, [](const auto& v) { return xt::exp(v); },
      [](const auto& g, const auto&, const auto& out) { return g * out; });
}

Tensor log(const Tensor& x) {
  return unary_op(
      "log", x, [](const auto& v) { return xt::log(v); },
      [](const auto& g, const auto& v, const auto&) { return g / v; });
}

Tensor sqrt(const Tensor& x) {
  return unary_op(
      "sqrt", x, [](const auto& v) { return xt::sqrt(v); },
      [](const auto& g, const auto&, const auto& out) { return g / (out + out); });
}

Tensor abs(const Tensor& x) {
  return unary_op(
      "abs", x, [](const auto& v) { return xt::abs(v); },
      [](const auto& g, const auto& v, const auto&) { return g * xt::sign(v); });
}

Tensor sin(const Tensor& x) {
  return unary_op(
      "sin", x, [](const auto& v) { return xt::sin(v); },
      [](const auto& g, const auto& v, const auto&) { return g * xt::cos(v); });
}

Tensor cos(const Tensor& x) {
  return unary_op(
      "cos", x, [](const auto& v) { return xt::cos(v); },
      [](const auto& g, const auto& v, const auto&) { return -g * xt::sin(v); });
}

Tensor erf(const Tensor& x) {
  return unary_op(
      "erf", x, [](const auto& v) { return xt::erf(v); },
      [](const auto& g, const auto& v, const auto&) {  // 2 / sqrt(pi) * exp(-x^2)
        using T = value_t<decltype(g)>;
        return g * (T(2) / std::sqrt(std::numbers::pi_v<T>)) * xt::exp(-v * v);
      });
}

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  XGRAD_CHECK(min || max, "clamp", "needs a min, a max or both");
  XGRAD_CHECK(!(min && std::isnan(*min)) && !(max && std::isnan(*max)), "clamp", "bounds must not be NaN");
  const double low = min.value_or(-std::numeric_limits<double>::infinity());
  const double high = max.value_or(std::numeric_limits<double>::infinity());
  // As torch.clamp: min is applied first, so min > max gives max everywhere; NaN stays
  // NaN; the gradient passes where low <= x <= high (both ends included).
  return unary_op(
      "clamp", x,
      [low, high](const auto& v) {
        using T = value_t<decltype(v)>;
        const T lo = static_cast<T>(low), hi = static_cast<T>(high);
        const xt::xarray<T> raised = xt::where(v < lo, lo, v);
        return xt::xarray<T>(xt::where(raised > hi, hi, raised));
      },
      [low, high](const auto& g, const auto& v, const auto&) {
        using T = value_t<decltype(g)>;
        const T lo = static_cast<T>(low), hi = static_cast<T>(high);
        return xt::xarray<T>(xt::where(v >= lo && v <= hi, g, T(0)));
      });
}

namespace {

// minimum / maximum: the gradient goes to the operand that was chosen, half to each on a
// tie (as PyTorch).
template <bool kMaximum>
Tensor extremum(const char* op, const Tensor& a, const Tensor& b) {
  // Both return an expression that owns its boolean array (moved into it) and is evaluated
  // straight into the output or gradient: the caller allocates that (new_array's guard).
  const auto share = [](const auto& g, const auto& mine, const auto& other, const auto&) {
    using T = value_t<decltype(g)>;
    auto chosen = kMaximum ? xt::xarray<bool>(mine > other) : xt::xarray<bool>(mine < other);
    return xt::where(std::move(chosen), g, xt::where(xt::equal(mine, other), g * T(0.5), T(0)));
  };
  return binary_op(
      op, a, b,
      [](const auto& x, const auto& y) {  // NaN in either operand gives NaN
        using T = value_t<decltype(x)>;
        auto pick = kMaximum ? xt::xarray<bool>(x >= y) : xt::xarray<bool>(x <= y);
        return xt::where(xt::isnan(x) || xt::isnan(y), std::numeric_limits<T>::quiet_NaN(),
                         xt::where(std::move(pick), x, y));
      },
      share, [share](const auto& g, const auto& x, const auto& y, const auto& out) { return share(g, y, x, out); });
}

}  // namespace

Tensor minimum(const Tensor& a, const Tensor& b) { return extremum<false>("minimum", a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return extremum<true>("maximum", a, b); }

// Tensor::to (tensor.cpp) is this op.
Tensor cast(const Tensor& x, DType target) {
  check_defined("cast", x);
  const DType source = x.dtype();
  if (source == target) return x;
  // dispatch_op's work, but one side is float32 work both ways: denormals flushed (a
  // float64 gradient of 1e-39 came back into float32 as a denormal: the engine's guard
  // follows the output's dtype).
  const hooks::ForwardScope op;
  const DenormalModeGuard flush(DType::float32);
  return dispatch(target, [&](auto target_tag) {
    using T = decltype(target_tag);
    return std::visit(
        [&](const auto& values) {
          return record<T>("cast", evaluate<T>("cast", xt::cast<T>(values)), {x}, [source](BackwardContext<T>& ctx) {
            const DenormalModeGuard flush_back(DType::float32);
            dispatch(source, [&](auto source_tag) {
              using S = decltype(source_tag);
              accumulate_grad(ctx.input_node(0), Storage(evaluate<S>(ctx.op(), xt::cast<S>(ctx.grad()))));
            });
          });
        },
        *x.node()->value);
  });
}

Tensor eq(const Tensor& a, const Tensor& b) {
  return compare_op("eq", a, b, [](const auto& x, const auto& y) { return xt::equal(x, y); });
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return compare_op("ne", a, b, [](const auto& x, const auto& y) { return xt::not_equal(x, y); });
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return compare_op("lt", a, b, [](const auto& x, const auto& y) { return xt::less(x, y); });
}
Tensor le(const Tensor& a, const Tensor& b) {
  return compare_op("le", a, b, [](const auto& x, const auto& y) { return xt::less_equal(x, y); });
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return compare_op("gt", a, b, [](const auto& x, const auto& y) { return xt::greater(x, y); });
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return compare_op("ge", a, b, [](const auto& x, const auto& y) { return xt::greater_equal(x, y); });
}
Tensor eq(const Tensor& a, double s) { return against_scalar("eq", eq, a, s); }
Tensor ne(const Tensor& a, double s) { return against_scalar("ne", ne, a, s); }
Tensor lt(const Tensor& a, double s) { return against_scalar("lt", lt, a, s); }
Tensor le(const Tensor& a, double s) { return against_scalar("le", le, a, s); }
Tensor gt(const Tensor& a, double s) { return against_scalar("gt", gt, a, s); }
Tensor ge(const Tensor& a, double s) { return against_scalar("ge", ge, a, s); }

// where and masked_fill index their operands through broadcast offset maps instead of
// xt::where: xtensor 0.24.3 with xsimd misreads a boolean condition of lower rank.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  check_defined("where", condition);
  check_same_dtype("where", a, b);
  const Shape out_shape = broadcast_shapes("where", condition.shape(), broadcast_shapes("where", a.shape(), b.shape()));
  return dispatch_op(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // Broadcasting can make the output far larger than any operand, and beside it go maps
    // of its length (the condition's truth, 1 byte an element, and each operand's offsets,
    // 8 each): all checked against memory before any is made (new_array's guard).
    std::size_t bytes = 0;
    XGRAD_CHECK(!__builtin_mul_overflow(numel(out_shape), sizeof(T) + 1 + 2 * sizeof(std::size_t), &bytes), "where",
                "shape ", out_shape, " needs more than 2^64 bytes");
    check_fits_in_memory("where", bytes, out_shape, " ", dtype_of<T>(), " with its index maps");
    xt::xarray<T> out = new_array<T>("where", out_shape);
    std::vector<std::uint8_t> keep = truth_at(condition, out_shape);
    const std::vector<std::size_t> a_at = batch_offsets(a.shape(), out_shape, 1);
    const std::vector<std::size_t> b_at = batch_offsets(b.shape(), out_shape, 1);
    kernels::select_where(keep.data(), a.node()->values<T>().data(), a_at.data(), b.node()->values<T>().data(),
                          b_at.data(), keep.size(), out.data());
    return record<T>("where", std::move(out), {a, b}, [keep = std::move(keep), out_shape](BackwardContext<T>& ctx) {
      for (std::size_t input = 0; input < 2; ++input) {
        if (!ctx.needs_grad(input)) continue;
        // Scatter-add into the input's own shape: broadcast axes sum themselves.
        const std::vector<std::size_t> at = batch_offsets(to_shape(ctx.input(input).shape()), out_shape, 1);
        kernels::scatter_add_where(ctx.grad().data(), keep.data(), /*taken=*/input == 0, at.data(), keep.size(),
                                   ctx.grad_buffer(input).data());
      }
    });
  });
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_defined("masked_fill", x);
  check_defined("masked_fill", mask);
  XGRAD_CHECK(broadcast_shapes("masked_fill", x.shape(), mask.shape()) == x.shape(), "masked_fill", "mask of shape ",
              mask.shape(), " does not broadcast to the input's shape ", x.shape());
  std::vector<std::uint8_t> fill = truth_at(mask, x.shape());
  return dispatch_op(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = evaluate<T>("masked_fill", x.node()->values<T>());
    kernels::fill_where(fill.data(), fill.size(), static_cast<T>(value), out.data());
    return record<T>("masked_fill", std::move(out), {x}, [fill = std::move(fill)](BackwardContext<T>& ctx) {
      xt::xarray<T> dx = evaluate<T>(ctx.op(), ctx.grad());
      kernels::fill_where(fill.data(), fill.size(), T(0), dx.data());
      ctx.accumulate(0, std::move(dx));
    });
  });
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& x, double s) { return add(x, s); }
Tensor operator+(double s, const Tensor& x) { return add(x, s); }
Tensor operator-(const Tensor& x, double s) { return add(x, -s); }
Tensor operator-(double s, const Tensor& x) { return rsub(s, x); }
Tensor operator*(const Tensor& x, double s) { return mul(x, s); }
Tensor operator*(double s, const Tensor& x) { return mul(x, s); }
Tensor operator/(const Tensor& x, double s) { return mul(x, 1.0 / s); }
Tensor operator/(double s, const Tensor& x) { return rdiv(s, x); }

}  // namespace xgrad
