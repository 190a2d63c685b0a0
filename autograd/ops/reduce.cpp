// sum, mean and max over chosen axes, with or without keeping the reduced axes.

#include <memory>

#include "xgrad/autograd/kernels/reduce.hpp"
#include "xgrad/autograd/ops.hpp"
#include "xgrad/autograd/record.hpp"

namespace xgrad {

namespace {

struct Reduction {
  Shape out_shape;
  std::shared_ptr<const kernels::ReducePlan> plan;  // shared with the backward closure
  std::size_t group_size = 1;                       // elements folded into each output
};

Reduction plan_reduction(const char* op, const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  check_defined(op, x);
  const Shape shape = x.shape();
  std::vector<bool> reduce(shape.size(), false);
  for (int axis : axes) {
    const std::size_t a = normalize_axis(op, axis, shape.size(), shape);
    XGRAD_CHECK(!reduce[a], op, "axis ", axis, " is listed twice for shape ", shape);
    reduce[a] = true;
  }
  Reduction r;
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
Tensor scaled_sum(const char* op, const Tensor& x, const Reduction& r, double scale) {
  return dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T s = static_cast<T>(scale);
    xt::xarray<T> out = xt::xarray<T>::from_shape(to_xshape<T>(r.out_shape));
    kernels::sum_reduce(x.node()->values<T>().data(), *r.plan, out.data());
    if (s != T(1)) out *= s;
    return record<T>(op, std::move(out), {x}, [plan = r.plan, s](BackwardContext<T>& ctx) {
      // Every element of a group receives its output's gradient.
      xt::xarray<T> dx = xt::xarray<T>::from_shape(ctx.input(0).shape());
      const T* g = ctx.grad().data();
      for (std::size_t i = 0; i < plan->kept.size(); ++i)
        for (std::size_t offset : plan->reduced) dx.data()[plan->kept[i] + offset] = g[i] * s;
      ctx.accumulate(0, std::move(dx));
    });
  });
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  return scaled_sum("sum", x, plan_reduction("sum", x, axes, keepdim), 1.0);
}

Tensor mean(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  const Reduction r = plan_reduction("mean", x, axes, keepdim);
  XGRAD_CHECK(r.group_size != 0, "mean", "cannot average over an empty axis of shape ", x.shape());
  return scaled_sum("mean", x, r, 1.0 / static_cast<double>(r.group_size));
}

Tensor max(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  const Reduction r = plan_reduction("max", x, axes, keepdim);
  XGRAD_CHECK(r.group_size != 0, "max", "cannot reduce over an empty axis of shape ", x.shape());
  return dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = xt::xarray<T>::from_shape(to_xshape<T>(r.out_shape));
    std::vector<std::size_t> argmax(r.plan->kept.size());
    kernels::max_reduce(x.node()->values<T>().data(), *r.plan, out.data(), argmax.data());
    return record<T>("max", std::move(out), {x}, [argmax = std::move(argmax)](BackwardContext<T>& ctx) {
      T* dx = ctx.grad_buffer(0).data();
      const T* g = ctx.grad().data();
      for (std::size_t i = 0; i < argmax.size(); ++i) dx[argmax[i]] += g[i];
    });
  });
}

Tensor sum(const Tensor& x) { return sum(x, all_axes("sum", x)); }
Tensor mean(const Tensor& x) { return mean(x, all_axes("mean", x)); }
Tensor max(const Tensor& x) { return max(x, all_axes("max", x)); }

}  // namespace xgrad
