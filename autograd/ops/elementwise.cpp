// Elementwise arithmetic, comparisons and selection. Binary ops broadcast; each gradient
// is computed at the broadcast shape and summed back to its input's shape.

#include <xtensor/xmath.hpp>
#include <xtensor/xoperation.hpp>

#include "autograd/ops.hpp"
#include "autograd/ops/shape_util.hpp"

namespace xgrad {

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  const std::size_t ndim = std::max(a.size(), b.size());
  Shape out(ndim);
  for (std::size_t i = 0; i < ndim; ++i) {
    const std::size_t da = i < ndim - a.size() ? 1 : a[i - (ndim - a.size())];
    const std::size_t db = i < ndim - b.size() ? 1 : b[i - (ndim - b.size())];
    if (da != db && da != 1 && db != 1)
      fail(op, "shapes " + shape_str(a) + " and " + shape_str(b) + " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<bool> unbroadcast_axes(const Shape& from, const Shape& to) {
  const std::size_t leading = from.size() - to.size();
  std::vector<bool> reduce(from.size());
  for (std::size_t i = 0; i < from.size(); ++i)
    reduce[i] = i < leading || (to[i - leading] == 1 && from[i] != 1);
  return reduce;
}

namespace {

// Element type of an xtensor expression (the generic lambdas below get typed arrays).
template <class E>
using value_t = typename std::decay_t<E>::value_type;

// forward(x) -> values; grad(g, x, y) -> gradient of x (y is the output).
template <class Forward, class Grad>
Tensor unary_op(const char* op, const Tensor& x, Forward forward, Grad grad) {
  check_defined(op, x);
  return dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = forward(x.node()->values<T>());
    return record<T>(op, std::move(out), {x}, [grad](BackwardContext<T>& ctx) {
      ctx.accumulate(0, grad(ctx.grad(), ctx.input(0), ctx.output()));
    });
  });
}

// forward(a, b) -> values; grad_a / grad_b(g, a, b, y) -> gradient at the broadcast shape.
template <class Forward, class GradA, class GradB>
Tensor binary_op(const char* op, const Tensor& a, const Tensor& b, Forward forward, GradA grad_a,
                 GradB grad_b) {
  check_same_dtype(op, a, b);
  broadcast_shapes(op, a.shape(), b.shape());
  return dispatch(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = forward(a.node()->values<T>(), b.node()->values<T>());
    return record<T>(op, std::move(out), {a, b}, [grad_a, grad_b](BackwardContext<T>& ctx) {
      const auto& g = ctx.grad();
      const auto& x = ctx.input(0);
      const auto& y = ctx.input(1);
      const auto& out = ctx.output();
      if (ctx.needs_grad(0))
        ctx.accumulate(0, unbroadcast<T>(grad_a(g, x, y, out), to_shape(x.shape())));
      if (ctx.needs_grad(1))
        ctx.accumulate(1, unbroadcast<T>(grad_b(g, x, y, out), to_shape(y.shape())));
    });
  });
}

// Comparisons: 1 where true, 0 where false; never part of the graph.
template <class Compare>
Tensor compare_op(const char* op, const Tensor& a, const Tensor& b, Compare compare) {
  check_same_dtype(op, a, b);
  broadcast_shapes(op, a.shape(), b.shape());
  return dispatch(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = xt::cast<T>(compare(a.node()->values<T>(), b.node()->values<T>()));
    return make_leaf(std::move(out));
  });
}

// The mask's truth values (nonzero = true), whatever its dtype.
xt::xarray<bool> truth(const Tensor& mask) {
  return std::visit([](const auto& m) { return xt::xarray<bool>(xt::not_equal(m, 0)); },
                    *mask.node()->value);
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  return binary_op(
      "add", a, b, [](const auto& x, const auto& y) { return x + y; },
      [](const auto& g, const auto&, const auto&, const auto&) { return g; },
      [](const auto& g, const auto&, const auto&, const auto&) { return g; });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  return binary_op(
      "sub", a, b, [](const auto& x, const auto& y) { return x - y; },
      [](const auto& g, const auto&, const auto&, const auto&) { return g; },
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
      [](const auto& g, const auto& x, const auto& e, const auto&) { return g * e * xt::pow(x, e - 1); },
      [](const auto& g, const auto& x, const auto&, const auto& out) { return g * out * xt::log(x); });
}

Tensor neg(const Tensor& x) {
  return unary_op(
      "neg", x, [](const auto& v) { return -v; },
      [](const auto& g, const auto&, const auto&) { return -g; });
}

Tensor add(const Tensor& x, double s) {
  return unary_op(
      "add_scalar", x, [s](const auto& v) { return v + static_cast<value_t<decltype(v)>>(s); },
      [](const auto& g, const auto&, const auto&) { return g; });
}

Tensor mul(const Tensor& x, double s) {
  return unary_op(
      "mul_scalar", x, [s](const auto& v) { return v * static_cast<value_t<decltype(v)>>(s); },
      [s](const auto& g, const auto&, const auto&) {
        return g * static_cast<value_t<decltype(g)>>(s);
      });
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
        using T = value_t<decltype(g)>;
        return g * static_cast<T>(exponent) * xt::pow(v, static_cast<T>(exponent - 1));
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
Tensor eq(const Tensor& a, double s) { check_defined("eq", a); return eq(a, Tensor::scalar(s, a.dtype())); }
Tensor ne(const Tensor& a, double s) { check_defined("ne", a); return ne(a, Tensor::scalar(s, a.dtype())); }
Tensor lt(const Tensor& a, double s) { check_defined("lt", a); return lt(a, Tensor::scalar(s, a.dtype())); }
Tensor le(const Tensor& a, double s) { check_defined("le", a); return le(a, Tensor::scalar(s, a.dtype())); }
Tensor gt(const Tensor& a, double s) { check_defined("gt", a); return gt(a, Tensor::scalar(s, a.dtype())); }
Tensor ge(const Tensor& a, double s) { check_defined("ge", a); return ge(a, Tensor::scalar(s, a.dtype())); }

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  check_defined("where", condition);
  check_same_dtype("where", a, b);
  broadcast_shapes("where", condition.shape(), broadcast_shapes("where", a.shape(), b.shape()));
  xt::xarray<bool> keep = truth(condition);
  return dispatch(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = xt::where(keep, a.node()->values<T>(), b.node()->values<T>());
    return record<T>("where", std::move(out), {a, b}, [keep = std::move(keep)](BackwardContext<T>& ctx) {
      const auto& g = ctx.grad();
      if (ctx.needs_grad(0))
        ctx.accumulate(0, unbroadcast<T>(xt::where(keep, g, T(0)), to_shape(ctx.input(0).shape())));
      if (ctx.needs_grad(1))
        ctx.accumulate(1, unbroadcast<T>(xt::where(keep, T(0), g), to_shape(ctx.input(1).shape())));
    });
  });
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_defined("masked_fill", x);
  check_defined("masked_fill", mask);
  if (broadcast_shapes("masked_fill", x.shape(), mask.shape()) != x.shape())
    fail("masked_fill", "mask of shape " + shape_str(mask.shape()) +
                            " does not broadcast to the input's shape " + shape_str(x.shape()));
  xt::xarray<bool> fill = truth(mask);
  return dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = xt::where(fill, static_cast<T>(value), x.node()->values<T>());
    return record<T>("masked_fill", std::move(out), {x}, [fill = std::move(fill)](BackwardContext<T>& ctx) {
      ctx.accumulate(0, xt::where(fill, T(0), ctx.grad()));
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
