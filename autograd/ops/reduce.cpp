// sum, mean, max, var and stddev over chosen axes, with or without keeping the reduced axes;
// argmax/argmin and cumsum along one axis.

#include <memory>
#include <optional>

#include "xgrad/autograd/kernels/reduce.hpp"
#include "xgrad/autograd/ops.hpp"
#include "xgrad/autograd/ops/shape_util.hpp"
#include "xgrad/autograd/record.hpp"

namespace xgrad {

namespace {

struct AxesPlan {
  Shape out_shape;
  std::shared_ptr<const kernels::ReducePlan> plan;  // shared with the backward closure
  std::size_t group_size = 1;                       // elements folded into each output
};

AxesPlan plan_reduction(const char* op, const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  check_defined(op, x);
  const Shape shape = x.shape();
  std::vector<bool> reduce(shape.size(), false);
  for (int axis : axes) {
    const std::size_t a = normalize_axis(op, axis, shape.size(), shape);
    XGRAD_CHECK(!reduce[a], op, "axis ", axis, " is listed twice for shape ", shape);
    reduce[a] = true;
  }
  AxesPlan r;
  for (std::size_t a = 0; a < shape.size(); ++a) {
    if (!reduce[a]) {
      r.out_shape.push_back(shape[a]);
    } else {
      r.group_size *= shape[a];
      if (keepdim) r.out_shape.push_back(1);
    }
  }
  r.plan = std::make_shared<const kernels::ReducePlan>(kernels::make_reduce_plan(shape, reduce));
  return r;
}

std::vector<int> all_axes(const char* op, const Tensor& x) {
  check_defined(op, x);
  std::vector<int> axes(x.dim());
  for (std::size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int>(i);
  return axes;
}

// sum(x) * scale over the planned axes; mean is the sum scaled by 1 / group_size.
Tensor scaled_sum(const char* op, const Tensor& x, const AxesPlan& r, double scale) {
  return dispatch_op(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T s = static_cast<T>(scale);
    xt::xarray<T> out = new_array<T>(op, r.out_shape);
    kernels::sum_reduce(x.node()->values<T>().data(), *r.plan, out.data());
    if (s != T(1)) out *= s;
    return record<T>(op, std::move(out), {x}, [plan = r.plan, s](BackwardContext<T>& ctx) {
      // Every element of a group receives its output's gradient.
      xt::xarray<T> dx = new_array<T>(ctx.op(), ctx.input(0).shape());
      kernels::sum_reduce_backward(ctx.grad().data(), *plan, s, dx.data());
      ctx.accumulate(0, std::move(dx));
    });
  });
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  return scaled_sum("sum", x, plan_reduction("sum", x, axes, keepdim), 1.0);
}

Tensor mean(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  const AxesPlan r = plan_reduction("mean", x, axes, keepdim);
  XGRAD_CHECK(r.group_size != 0, "mean", "cannot average over an empty axis of shape ", x.shape());
  return scaled_sum("mean", x, r, 1.0 / static_cast<double>(r.group_size));
}

Tensor max(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  const AxesPlan r = plan_reduction("max", x, axes, keepdim);
  XGRAD_CHECK(r.group_size != 0, "max", "cannot reduce over an empty axis of shape ", x.shape());
  return dispatch_op(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = new_array<T>("max", r.out_shape);
    std::vector<std::size_t> argmax(r.plan->kept.size());
    kernels::max_reduce(x.node()->values<T>().data(), *r.plan, out.data(), argmax.data());
    return record<T>("max", std::move(out), {x}, [argmax = std::move(argmax)](BackwardContext<T>& ctx) {
      kernels::max_reduce_backward(ctx.grad().data(), argmax.data(), argmax.size(), ctx.grad_buffer(0).data());
    });
  });
}

namespace {

// var (kStd false) or stddev over the planned groups: two passes per group (mean, then the
// squared deviations), divided by n - correction.
template <bool kStd>
Tensor spread(const char* op, const Tensor& x, const std::vector<int>& axes, int correction, bool keepdim) {
  const AxesPlan r = plan_reduction(op, x, axes, keepdim);
  const auto dof = static_cast<std::int64_t>(r.group_size) - correction;
  XGRAD_CHECK(correction >= 0, op, "correction ", correction, " must be >= 0");
  XGRAD_CHECK(dof > 0, op, "groups of ", r.group_size, " elements of ", x.shape(), " with correction ", correction,
              " leave no degrees of freedom (it would divide by ", dof, ")");
  return dispatch_op(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T divisor = static_cast<T>(dof);
    std::vector<T> means(r.plan->kept.size());
    xt::xarray<T> out = new_array<T>(op, r.out_shape);
    kernels::variance_reduce(x.node()->values<T>().data(), *r.plan, divisor, kStd, means.data(), out.data());
    return record<T>(op, std::move(out), {x},
                     [plan = r.plan, means = std::move(means), divisor](BackwardContext<T>& ctx) {
                       xt::xarray<T> dx = new_array<T>(ctx.op(), ctx.input(0).shape());
                       kernels::variance_reduce_backward(ctx.input(0).data(), ctx.grad().data(), ctx.output().data(),
                                                         means.data(), *plan, divisor, kStd, dx.data());
                       ctx.accumulate(0, std::move(dx));
                     });
  });
}

// The index of the first largest (kMax) or smallest element along `axis`; NaN counts as
// the extreme, as in PyTorch.
template <bool kMax>
Indices arg_extreme(const char* op, const Tensor& x, std::optional<int> axis, bool keepdim) {
  check_defined(op, x);
  const Shape shape = x.shape();
  XGRAD_CHECK(numel(shape) > 0, op, "of an empty tensor ", shape, " has no answer");
  AxisBlocks b{1, numel(shape), 1};
  Shape out_shape;
  if (axis) {
    XGRAD_CHECK(!shape.empty(), op, "axis ", *axis, " of a scalar");
    const std::size_t a = normalize_axis(op, *axis, shape.size(), shape);
    b = blocks_around(shape, a);
    for (std::size_t i = 0; i < shape.size(); ++i)
      if (i != a)
        out_shape.push_back(shape[i]);
      else if (keepdim)
        out_shape.push_back(1);
  } else if (keepdim) {
    out_shape.assign(shape.size(), 1);
  }
  std::vector<std::int64_t> found(b.outer * b.inner);
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::arg_extreme_along(x.node()->values<T>().data(), b.outer, b.n, b.inner, kMax, found.data());
  });
  return Indices(std::move(found), out_shape);
}

}  // namespace

Tensor var(const Tensor& x, const std::vector<int>& axes, int correction, bool keepdim) {
  return spread<false>("var", x, axes, correction, keepdim);
}
Tensor stddev(const Tensor& x, const std::vector<int>& axes, int correction, bool keepdim) {
  return spread<true>("stddev", x, axes, correction, keepdim);
}
Tensor detail::var_all(const Tensor& x, int correction) { return var(x, all_axes("var", x), correction); }
Tensor detail::stddev_all(const Tensor& x, int correction) { return stddev(x, all_axes("stddev", x), correction); }

Indices argmax(const Tensor& x) { return arg_extreme<true>("argmax", x, std::nullopt, false); }
Indices argmin(const Tensor& x) { return arg_extreme<false>("argmin", x, std::nullopt, false); }
Indices argmax(const Tensor& x, int axis, bool keepdim) { return arg_extreme<true>("argmax", x, axis, keepdim); }
Indices argmin(const Tensor& x, int axis, bool keepdim) { return arg_extreme<false>("argmin", x, axis, keepdim); }

Tensor cumsum(const Tensor& x, int axis) {
  check_defined("cumsum", x);
  const Shape shape = x.shape();
  XGRAD_CHECK(!shape.empty(), "cumsum", "needs at least one axis, got a scalar");
  const AxisBlocks b = blocks_around(shape, normalize_axis("cumsum", axis, shape.size(), shape));
  return dispatch_op(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = new_array<T>("cumsum", shape);
    kernels::running_sum(x.node()->values<T>().data(), out.data(), b.outer, b.n, b.inner, false);
    return record<T>("cumsum", std::move(out), {x}, [b](BackwardContext<T>& ctx) {
      // Element j feeds every output from j on: its gradient is the reversed running sum.
      xt::xarray<T> dx = new_array<T>(ctx.op(), ctx.grad().shape());
      kernels::running_sum(ctx.grad().data(), dx.data(), b.outer, b.n, b.inner, true);
      ctx.accumulate(0, std::move(dx));
    });
  });
}

Tensor sum(const Tensor& x) { return sum(x, all_axes("sum", x)); }
Tensor mean(const Tensor& x) { return mean(x, all_axes("mean", x)); }
Tensor max(const Tensor& x) { return max(x, all_axes("max", x)); }

}  // namespace xgrad
