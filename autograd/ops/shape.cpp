// Shape ops: reshape, permute, slice, concat, split, unsqueeze/squeeze, expand.
// Each result owns its data (a contiguous copy); backward maps the gradient back.

#include <numeric>
#include <optional>

#include <xtensor/xbroadcast.hpp>

#include "autograd/kernels/copy.hpp"
#include "autograd/ops.hpp"
#include "autograd/ops/shape_util.hpp"

namespace xgrad {

namespace {

// Same elements in the same order, new shape (numel already checked).
Tensor reshape_to(const char* op, const Tensor& x, const Shape& shape) {
  return dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = x.node()->values<T>();
    out.reshape(to_xshape<T>(shape));
    return record<T>(op, std::move(out), {x}, [](BackwardContext<T>& ctx) {
      xt::xarray<T> g = ctx.grad();
      g.reshape(ctx.input(0).shape());
      ctx.accumulate(0, std::move(g));
    });
  });
}

// Positions [start, end) by `step` along `axis` of `shape`, as the copy kernels take them.
kernels::AxisSelection select_along(const Shape& shape, std::size_t axis, std::size_t start,
                                    std::size_t end, std::size_t step) {
  const AxisBlocks b = blocks_around(shape, axis);
  return {b.outer, b.n, b.inner, start, (end - start + step - 1) / step, step};
}

}  // namespace

Tensor reshape(const Tensor& x, const std::vector<std::int64_t>& shape) {
  check_defined("reshape", x);
  const Shape from = x.shape();
  const auto describe = [&] {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  };
  Shape to(shape.size());
  std::size_t known = 1;
  std::optional<std::size_t> inferred;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (inferred) fail("reshape", "only one dimension may be -1, got " + describe());
      inferred = i;
    } else if (shape[i] < 0) {
      fail("reshape", "invalid dimension " + std::to_string(shape[i]) + " in " + describe());
    } else {
      to[i] = static_cast<std::size_t>(shape[i]);
      known *= to[i];
    }
  }
  const std::size_t count = numel(from);
  if (inferred) {
    if (known == 0 || count % known != 0)
      fail("reshape", "cannot reshape " + shape_str(from) + " (" + std::to_string(count) +
                          " elements) to " + describe());
    to[*inferred] = count / known;
  }
  if (numel(to) != count)
    fail("reshape", "cannot reshape " + shape_str(from) + " (" + std::to_string(count) +
                        " elements) to " + describe());
  return reshape_to("reshape", x, to);
}

Tensor unsqueeze(const Tensor& x, int axis) {
  check_defined("unsqueeze", x);
  Shape shape = x.shape();
  const std::size_t a = normalize_axis("unsqueeze", axis, shape.size() + 1, shape);
  shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(a), 1);
  return reshape_to("unsqueeze", x, shape);
}

Tensor squeeze(const Tensor& x, int axis) {
  check_defined("squeeze", x);
  Shape shape = x.shape();
  const std::size_t a = normalize_axis("squeeze", axis, shape.size(), shape);
  if (shape[a] != 1)
    fail("squeeze", "axis " + std::to_string(axis) + " of shape " + shape_str(shape) + " has size " +
                        std::to_string(shape[a]) + ", not 1");
  shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(a));
  return reshape_to("squeeze", x, shape);
}

Tensor permute(const Tensor& x, const std::vector<int>& axes) {
  check_defined("permute", x);
  const Shape shape = x.shape();
  if (axes.size() != shape.size())
    fail("permute", std::to_string(axes.size()) + " axes given for shape " + shape_str(shape));
  std::vector<std::size_t> perm(axes.size()), inverse(axes.size());
  std::vector<bool> seen(axes.size(), false);
  for (std::size_t i = 0; i < axes.size(); ++i) {
    perm[i] = normalize_axis("permute", axes[i], shape.size(), shape);
    if (seen[perm[i]]) fail("permute", "axis " + std::to_string(axes[i]) + " appears twice for shape " + shape_str(shape));
    seen[perm[i]] = true;
    inverse[perm[i]] = i;
  }
  Shape out_shape(shape.size());
  for (std::size_t i = 0; i < perm.size(); ++i) out_shape[i] = shape[perm[i]];
  return dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = xt::xarray<T>::from_shape(to_xshape<T>(out_shape));
    kernels::permute_copy(x.node()->values<T>().data(), out.data(), shape, perm);
    return record<T>("permute", std::move(out), {x}, [inverse, out_shape](BackwardContext<T>& ctx) {
      xt::xarray<T> dx = xt::xarray<T>::from_shape(ctx.input(0).shape());
      kernels::permute_copy(ctx.grad().data(), dx.data(), out_shape, inverse);
      ctx.accumulate(0, std::move(dx));
    });
  });
}

Tensor transpose(const Tensor& x, int axis0, int axis1) {
  check_defined("transpose", x);
  const Shape shape = x.shape();
  std::vector<int> axes(shape.size());
  std::iota(axes.begin(), axes.end(), 0);
  std::swap(axes[normalize_axis("transpose", axis0, shape.size(), shape)],
            axes[normalize_axis("transpose", axis1, shape.size(), shape)]);
  return permute(x, axes);
}

Tensor slice(const Tensor& x, int axis, std::size_t start, std::size_t end, std::size_t step) {
  check_defined("slice", x);
  const Shape shape = x.shape();
  const std::size_t a = normalize_axis("slice", axis, shape.size(), shape);
  end = std::min(end, shape[a]);
  if (step == 0) fail("slice", "step must be positive");
  if (start > end)
    fail("slice", "start " + std::to_string(start) + " is past the end " + std::to_string(end) +
                      " of axis " + std::to_string(axis) + " in shape " + shape_str(shape));
  const kernels::AxisSelection selection = select_along(shape, a, start, end, step);
  Shape out_shape = shape;
  out_shape[a] = selection.count;
  return dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = xt::xarray<T>::from_shape(to_xshape<T>(out_shape));
    kernels::gather_axis(x.node()->values<T>().data(), out.data(), selection);
    return record<T>("slice", std::move(out), {x}, [selection](BackwardContext<T>& ctx) {
      kernels::scatter_axis(ctx.grad().data(), ctx.grad_buffer(0).data(), selection, /*accumulate=*/true);
    });
  });
}

Tensor concat(const std::vector<Tensor>& xs, int axis) {
  if (xs.empty()) fail("concat", "needs at least one tensor");
  for (const Tensor& x : xs) check_same_dtype("concat", xs.front(), x);
  const Shape first = xs.front().shape();
  if (first.empty()) fail("concat", "cannot concatenate scalars (shape [])");
  const std::size_t a = normalize_axis("concat", axis, first.size(), first);
  Shape out_shape = first;
  out_shape[a] = 0;
  std::vector<std::size_t> offsets;  // where each input starts along the axis
  for (const Tensor& x : xs) {
    Shape s = x.shape();
    Shape expected = first;
    expected[a] = s.size() == first.size() ? s[a] : 0;
    if (s != expected)
      fail("concat", "shape " + shape_str(s) + " does not match " + shape_str(first) +
                         " outside axis " + std::to_string(axis));
    offsets.push_back(out_shape[a]);
    out_shape[a] += s[a];
  }
  std::vector<kernels::AxisSelection> pieces;  // where each input lands in the output
  for (std::size_t i = 0; i < xs.size(); ++i)
    pieces.push_back(select_along(out_shape, a, offsets[i], offsets[i] + xs[i].shape()[a], 1));
  return dispatch(xs.front().dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = xt::xarray<T>::from_shape(to_xshape<T>(out_shape));
    for (std::size_t i = 0; i < xs.size(); ++i)
      kernels::scatter_axis(xs[i].node()->values<T>().data(), out.data(), pieces[i], /*accumulate=*/false);
    return record<T>("concat", std::move(out), xs, [pieces](BackwardContext<T>& ctx) {
      for (std::size_t i = 0; i < pieces.size(); ++i) {
        if (!ctx.needs_grad(i)) continue;
        xt::xarray<T> piece = xt::xarray<T>::from_shape(ctx.input(i).shape());
        kernels::gather_axis(ctx.grad().data(), piece.data(), pieces[i]);
        ctx.accumulate(i, std::move(piece));
      }
    });
  });
}

std::vector<Tensor> split(const Tensor& x, const std::vector<std::size_t>& sizes, int axis) {
  check_defined("split", x);
  const Shape shape = x.shape();
  const std::size_t a = normalize_axis("split", axis, shape.size(), shape);
  const std::size_t total = std::accumulate(sizes.begin(), sizes.end(), std::size_t{0});
  if (total != shape[a])
    fail("split", "sizes add up to " + std::to_string(total) + " but axis " + std::to_string(axis) +
                      " of shape " + shape_str(shape) + " has " + std::to_string(shape[a]));
  std::vector<Tensor> pieces;
  std::size_t start = 0;
  for (std::size_t size : sizes) {
    pieces.push_back(slice(x, axis, start, start + size));
    start += size;
  }
  return pieces;
}

std::vector<Tensor> chunk(const Tensor& x, std::size_t chunks, int axis) {
  check_defined("chunk", x);
  const Shape shape = x.shape();
  const std::size_t a = normalize_axis("chunk", axis, shape.size(), shape);
  if (chunks == 0 || shape[a] % chunks != 0)
    fail("chunk", "axis " + std::to_string(axis) + " of shape " + shape_str(shape) +
                      " does not split into " + std::to_string(chunks) + " equal pieces");
  return split(x, std::vector<std::size_t>(chunks, shape[a] / chunks), axis);
}

Tensor expand(const Tensor& x, const Shape& shape) {
  check_defined("expand", x);
  const Shape from = x.shape();
  if (from.size() > shape.size() || broadcast_shapes("expand", from, shape) != shape)
    fail("expand", "shape " + shape_str(from) + " cannot be expanded to " + shape_str(shape));
  return dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = xt::broadcast(x.node()->values<T>(), to_xshape<T>(shape));
    return record<T>("expand", std::move(out), {x}, [](BackwardContext<T>& ctx) {
      ctx.accumulate(0, unbroadcast<T>(ctx.grad(), to_shape(ctx.input(0).shape())));
    });
  });
}

}  // namespace xgrad
