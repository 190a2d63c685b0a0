// Shape ops: reshape, permute, slice, concat, split, unsqueeze/squeeze, expand, pad,
// triu/tril.
// Each result owns its data (a contiguous copy); backward maps the gradient back.

#include <numeric>
#include <optional>

#include <xtensor/xbroadcast.hpp>
#include <xtensor/xnoalias.hpp>

#include "xgrad/autograd/kernels/copy.hpp"
#include "xgrad/autograd/kernels/indexing.hpp"
#include "xgrad/autograd/kernels/mask.hpp"
#include "xgrad/autograd/ops.hpp"
#include "xgrad/autograd/ops/shape_util.hpp"

namespace xgrad {

namespace {

// Same elements in the same order, new shape (numel already checked).
Tensor reshape_to(const char* op, const Tensor& x, const Shape& shape) {
  return dispatch_op(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = evaluate<T>(op, x.node()->values<T>());
    out.reshape(to_xshape<T>(shape));
    return record<T>(op, std::move(out), {x}, [](BackwardContext<T>& ctx) {
      xt::xarray<T> g = evaluate<T>(ctx.op(), ctx.grad());
      g.reshape(ctx.input(0).shape());
      ctx.accumulate(0, std::move(g));
    });
  });
}

// Positions [start, end) by `step` along `axis` of `shape`, as the copy kernels take them.
kernels::AxisSelection select_along(const Shape& shape, std::size_t axis, std::size_t start, std::size_t end,
                                    std::size_t step) {
  const AxisBlocks b = blocks_around(shape, axis);
  return {b.outer, b.n, b.inner, start, end == start ? 0 : (end - start - 1) / step + 1, step};
}

}  // namespace

Tensor reshape(const Tensor& x, const std::vector<std::int64_t>& shape) {
  check_defined("reshape", x);
  const Shape from = x.shape();
  Shape to(shape.size());
  std::size_t known = 1;
  std::optional<std::size_t> inferred;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      XGRAD_CHECK(!inferred, "reshape", "only one dimension may be -1, got ", shape);
      inferred = i;
    } else if (shape[i] < 0) {
      fail("reshape", "invalid dimension ", shape[i], " in ", shape);
    } else {
      to[i] = static_cast<std::size_t>(shape[i]);
      XGRAD_CHECK(!__builtin_mul_overflow(known, to[i], &known), "reshape", "the sizes ", shape, " multiply past 2^64");
    }
  }
  const std::size_t count = numel(from);
  if (inferred) {
    XGRAD_CHECK(known != 0 && count % known == 0, "reshape", "cannot reshape ", from, " (", count, " elements) to ",
                shape);
    to[*inferred] = count / known;
  }
  XGRAD_CHECK(numel(to) == count, "reshape", "cannot reshape ", from, " (", count, " elements) to ", shape);
  return reshape_to("reshape", x, to);
}

Tensor reshape(const Tensor& x, std::initializer_list<std::int64_t> shape) {
  return reshape(x, std::vector<std::int64_t>(shape));
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  check_defined("reshape", x);
  const Shape from = x.shape();
  XGRAD_CHECK(numel(from) == numel(shape), "reshape", "cannot reshape ", from, " (", numel(from), " elements) to ",
              shape);
  return reshape_to("reshape", x, shape);
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
  XGRAD_CHECK(shape[a] == 1, "squeeze", "axis ", axis, " of shape ", shape, " has size ", shape[a], ", not 1");
  shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(a));
  return reshape_to("squeeze", x, shape);
}

Tensor permute(const Tensor& x, const std::vector<int>& axes) {
  check_defined("permute", x);
  const Shape shape = x.shape();
  XGRAD_CHECK(axes.size() == shape.size(), "permute", axes.size(), " axes given for shape ", shape);
  std::vector<std::size_t> perm(axes.size()), inverse(axes.size());
  std::vector<bool> seen(axes.size(), false);
  for (std::size_t i = 0; i < axes.size(); ++i) {
    perm[i] = normalize_axis("permute", axes[i], shape.size(), shape);
    XGRAD_CHECK(!seen[perm[i]], "permute", "axis ", axes[i], " appears twice for shape ", shape);
    seen[perm[i]] = true;
    inverse[perm[i]] = i;
  }
  Shape out_shape(shape.size());
  for (std::size_t i = 0; i < perm.size(); ++i) out_shape[i] = shape[perm[i]];
  return dispatch_op(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = new_array<T>("permute", out_shape);
    kernels::permute_copy(x.node()->values<T>().data(), out.data(), shape, perm);
    return record<T>("permute", std::move(out), {x}, [inverse, out_shape](BackwardContext<T>& ctx) {
      xt::xarray<T> dx = new_array<T>(ctx.op(), ctx.input(0).shape());
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
  XGRAD_CHECK(step != 0, "slice", "step must be positive");
  XGRAD_CHECK(start <= end, "slice", "start ", start, " is past the end ", end, " of axis ", axis, " in shape ", shape);
  const kernels::AxisSelection selection = select_along(shape, a, start, end, step);
  Shape out_shape = shape;
  out_shape[a] = selection.count;
  return dispatch_op(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = new_array<T>("slice", out_shape);
    kernels::gather_axis(x.node()->values<T>().data(), out.data(), selection);
    return record<T>("slice", std::move(out), {x}, [selection](BackwardContext<T>& ctx) {
      kernels::scatter_axis(ctx.grad().data(), ctx.grad_buffer(0).data(), selection, /*accumulate=*/true);
    });
  });
}

Tensor concat(const std::vector<Tensor>& xs, int axis) {
  XGRAD_CHECK(!xs.empty(), "concat", "needs at least one tensor");
  for (const Tensor& x : xs) check_same_dtype("concat", xs.front(), x);
  const Shape first = xs.front().shape();
  XGRAD_CHECK(!first.empty(), "concat", "cannot concatenate scalars (shape [])");
  const std::size_t a = normalize_axis("concat", axis, first.size(), first);
  Shape out_shape = first;
  out_shape[a] = 0;
  std::vector<std::size_t> offsets;  // where each input starts along the axis
  for (const Tensor& x : xs) {
    Shape s = x.shape();
    Shape expected = first;
    expected[a] = s.size() == first.size() ? s[a] : 0;
    XGRAD_CHECK(s == expected, "concat", "shape ", s, " does not match ", first, " outside axis ", axis);
    offsets.push_back(out_shape[a]);
    out_shape[a] += s[a];
  }
  std::vector<kernels::AxisSelection> pieces;  // where each input lands in the output
  for (std::size_t i = 0; i < xs.size(); ++i)
    pieces.push_back(select_along(out_shape, a, offsets[i], offsets[i] + xs[i].shape()[a], 1));
  return dispatch_op(xs.front().dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = new_array<T>("concat", out_shape);
    for (std::size_t i = 0; i < xs.size(); ++i)
      kernels::scatter_axis(xs[i].node()->values<T>().data(), out.data(), pieces[i], /*accumulate=*/false);
    return record<T>("concat", std::move(out), xs, [pieces](BackwardContext<T>& ctx) {
      for (std::size_t i = 0; i < pieces.size(); ++i) {
        if (!ctx.needs_grad(i)) continue;
        xt::xarray<T> piece = new_array<T>(ctx.op(), ctx.input(i).shape());
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
  std::size_t total = 0;
  bool wrapped = false;  // sizes whose sum passes 2^64 cannot fill any axis
  for (const std::size_t size : sizes) wrapped = __builtin_add_overflow(total, size, &total) || wrapped;
  XGRAD_CHECK(!wrapped && total == shape[a], "split", "sizes add up to ",
              wrapped ? std::string("more than 2^64") : std::to_string(total), " but axis ", axis, " of shape ", shape,
              " has ", shape[a]);
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
  XGRAD_CHECK(chunks != 0 && shape[a] % chunks == 0, "chunk", "axis ", axis, " of shape ", shape,
              " does not split into ", chunks, " equal pieces");
  return split(x, std::vector<std::size_t>(chunks, shape[a] / chunks), axis);
}

Tensor expand(const Tensor& x, const Shape& shape) {
  check_defined("expand", x);
  const Shape from = x.shape();
  XGRAD_CHECK(from.size() <= shape.size() && broadcast_shapes("expand", from, shape) == shape, "expand", "shape ", from,
              " cannot be expanded to ", shape);
  return dispatch_op(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = new_array<T>("expand", shape);
    xt::noalias(out) = xt::broadcast(x.node()->values<T>(), to_xshape<T>(shape));
    return record<T>("expand", std::move(out), {x}, [](BackwardContext<T>& ctx) {
      ctx.accumulate(0, unbroadcast<T>(ctx.op(), ctx.grad(), to_shape(ctx.input(0).shape())));
    });
  });
}

Tensor pad(const Tensor& x, const std::vector<std::int64_t>& pads, double value) {
  check_defined("pad", x);
  const Shape shape = x.shape();
  XGRAD_CHECK(pads.size() % 2 == 0 && pads.size() <= 2 * shape.size(), "pad", "pads ", pads,
              " must be (before, after) pairs for at most the ", shape.size(), " axes of ", shape);
  // before[d]: elements added (or, when negative, removed) in front of axis d.
  std::vector<std::int64_t> before(shape.size(), 0);
  Shape out_shape = shape;
  for (std::size_t pair = 0; pair < pads.size() / 2; ++pair) {
    const std::size_t d = shape.size() - 1 - pair;
    std::int64_t size = 0;
    XGRAD_CHECK(shape[d] <= static_cast<std::size_t>(INT64_MAX) &&
                    !__builtin_add_overflow(static_cast<std::int64_t>(shape[d]), pads[2 * pair], &size) &&
                    !__builtin_add_overflow(size, pads[2 * pair + 1], &size),
                "pad", "pads ", pads, " make axis ", d, " of ", shape, " larger than 2^63 elements");
    XGRAD_CHECK(size >= 0, "pad", "pads ", pads, " leave axis ", d, " of ", shape, " with ", size, " elements");
    before[d] = pads[2 * pair];
    out_shape[d] = static_cast<std::size_t>(size);
  }
  // Each output element's source offset in x, or kNoSource (it holds `value`).
  const std::size_t count = numel(out_shape);
  check_fits_in_memory("pad", count > SIZE_MAX / sizeof(std::size_t) ? SIZE_MAX : count * sizeof(std::size_t),
                       "the output ", out_shape, " of ", shape, " padded by ", pads);
  std::vector<std::size_t> sources;
  try {
    sources.resize(count);
  } catch (const std::bad_alloc&) {
    fail("pad", "cannot allocate the output ", out_shape, " of ", shape, " padded by ", pads);
  }
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t rest = i, offset = 0, stride = 1;
    bool inside = true;
    for (std::size_t d = shape.size(); d-- > 0;) {
      const auto source = static_cast<std::int64_t>(rest % out_shape[d]) - before[d];
      rest /= out_shape[d];
      inside = inside && source >= 0 && source < static_cast<std::int64_t>(shape[d]);
      offset += static_cast<std::size_t>(source) * stride;
      stride *= shape[d];
    }
    sources[i] = inside ? offset : kernels::kNoSource;
  }
  return dispatch_op(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = new_array<T>("pad", out_shape);
    kernels::gather_at(x.node()->values<T>().data(), sources.data(), count, static_cast<T>(value), out.data());
    return record<T>("pad", std::move(out), {x}, [sources = std::move(sources)](BackwardContext<T>& ctx) {
      xt::xarray<T> dx = zeros_array<T>(ctx.op(), ctx.input(0).shape());
      kernels::scatter_at(ctx.grad().data(), sources.data(), sources.size(), dx.data(), /*accumulate=*/false);
      ctx.accumulate(0, std::move(dx));
    });
  });
}

namespace {

// Keeps element (i, j) of each matrix in the last two axes where j - i >= diagonal
// (upper) or <= diagonal (lower), zeroes the rest; the gradient is masked the same way.
Tensor triangle(const char* op, const Tensor& x, std::int64_t diagonal, bool upper) {
  check_defined(op, x);
  const Shape shape = x.shape();
  XGRAD_CHECK(shape.size() >= 2, op, "needs a matrix (at least 2 axes), got ", shape);
  const std::size_t rows = shape[shape.size() - 2], cols = shape.back();
  return dispatch_op(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = new_array<T>(op, shape);
    kernels::keep_triangle(x.node()->values<T>().data(), out.data(), out.size(), rows, cols, diagonal, upper);
    return record<T>(op, std::move(out), {x}, [rows, cols, diagonal, upper](BackwardContext<T>& ctx) {
      xt::xarray<T> dx = new_array<T>(ctx.op(), ctx.grad().shape());
      kernels::keep_triangle(ctx.grad().data(), dx.data(), dx.size(), rows, cols, diagonal, upper);
      ctx.accumulate(0, std::move(dx));
    });
  });
}

}  // namespace

Tensor triu(const Tensor& x, std::int64_t diagonal) { return triangle("triu", x, diagonal, /*upper=*/true); }

Tensor tril(const Tensor& x, std::int64_t diagonal) { return triangle("tril", x, diagonal, /*upper=*/false); }

}  // namespace xgrad
