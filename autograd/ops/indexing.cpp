// Picking elements by integer position: embedding lookup, gather, index_select (each
// backward scatter-adds into the picked places), and Indices to and from tensors.

#include <cmath>

#include "xgrad/autograd/kernels/indexing.hpp"
#include "xgrad/autograd/ops.hpp"
#include "xgrad/autograd/ops/shape_util.hpp"
#include "xgrad/autograd/record.hpp"

namespace xgrad {

Tensor embedding(const Tensor& weight, const Indices& ids, const EmbeddingOptions& options) {
  check_defined("embedding", weight);
  ids.check("embedding");
  const Shape w_shape = weight.shape();
  XGRAD_CHECK(w_shape.size() == 2, "embedding", "weight must be 2-D [num, dim], got ", w_shape);
  const std::size_t num = w_shape[0], dim = w_shape[1];
  const auto signed_num = static_cast<std::int64_t>(num);
  for (std::size_t i = 0; i < ids.numel(); ++i)
    XGRAD_CHECK(ids.values[i] >= 0 && ids.values[i] < signed_num, "embedding", "id ", ids.values[i], " at position ", i,
                " of ids ", ids.shape, " is outside [0, ", num, ") for weight ", w_shape);
  // No padding row: -1, which no id equals.
  std::int64_t padding = -1;
  if (options.padding_idx) {
    padding = *options.padding_idx;
    XGRAD_CHECK(padding >= -signed_num && padding < signed_num, "embedding", "padding_idx ", padding, " is outside [-",
                num, ", ", num, ") for weight ", w_shape);
    if (padding < 0) padding += signed_num;
  }
  if (options.max_norm) {
    XGRAD_CHECK(*options.max_norm >= 0.0 && std::isfinite(*options.max_norm), "embedding",
                "max_norm must be finite and >= 0, got ", *options.max_norm, " for weight ", w_shape);
    XGRAD_CHECK(options.norm_type > 0.0, "embedding", "norm_type must be positive (or inf), got ", options.norm_type);
    // Outside the graph, as PyTorch's no_grad renorm: the lookup sees the new rows, and
    // the gradient is that of the lookup alone.
    // A change in place: ops that used the old rows can no longer differentiate. Float32
    // arithmetic as every op's: denormals flushed.
    const DenormalModeGuard mode(weight.dtype());
    dispatch(weight.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if (kernels::renorm_rows(weight.node()->values<T>().data(), ids.values, dim, *options.max_norm,
                               options.norm_type))
        weight.node()->mark_modified();
    });
  }
  Shape out_shape = ids.shape;
  out_shape.push_back(dim);
  // Per-row gradient factors of scale_grad_by_freq: 1 / (times the id appears).
  std::vector<double> row_scale;
  if (options.scale_grad_by_freq) {
    std::vector<std::size_t> counts(num, 0);
    for (const std::int64_t id : ids.values) ++counts[static_cast<std::size_t>(id)];
    row_scale.assign(num, 1.0);
    for (std::size_t r = 0; r < num; ++r)
      if (counts[r] > 1) row_scale[r] = 1.0 / static_cast<double>(counts[r]);
  }
  return dispatch_op(weight.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = new_array<T>("embedding", out_shape);
    kernels::gather_rows(weight.node()->values<T>().data(), ids.values.data(), ids.numel(), dim, out.data());
    return record<T>("embedding", std::move(out), {weight},
                     [rows = ids.values, dim, padding, row_scale = std::move(row_scale)](BackwardContext<T>& ctx) {
                       kernels::scatter_add_rows(ctx.grad().data(), rows.data(), rows.size(), dim, padding,
                                                 row_scale.empty() ? nullptr : row_scale.data(),
                                                 ctx.grad_buffer(0).data());
                     });
  });
}

namespace {

// Row-major strides of `shape`.
Shape strides_of(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

// Checks every index lies in [0, size) along `axis` of `shape`.
void check_positions(const char* op, const Indices& index, std::size_t size, const Shape& shape, std::size_t axis) {
  for (std::size_t i = 0; i < index.numel(); ++i)
    XGRAD_CHECK(index.values[i] >= 0 && static_cast<std::size_t>(index.values[i]) < size, op, "index ", index.values[i],
                " at position ", i, " of index ", index.shape, " is outside [0, ", size, ") along axis ", axis, " of ",
                shape);
}

// For each output element (in order), the offset of the input element it copies.
template <class Offset>
Tensor pick(const char* op, const Tensor& x, const Shape& out_shape, Offset offset_of) {
  const std::size_t count = numel(out_shape);
  std::vector<std::size_t> sources(count);
  for (std::size_t i = 0; i < count; ++i) sources[i] = offset_of(i);
  return dispatch_op(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> out = new_array<T>(op, out_shape);
    kernels::gather_at(x.node()->values<T>().data(), sources.data(), count, T(0), out.data());
    return record<T>(op, std::move(out), {x}, [sources = std::move(sources)](BackwardContext<T>& ctx) {
      kernels::scatter_at(ctx.grad().data(), sources.data(), sources.size(), ctx.grad_buffer(0).data(),
                          /*accumulate=*/true);
    });
  });
}

// gather and index_select: both operands usable, and the axis they pick along.
std::size_t picked_axis(const char* op, const Tensor& x, const Indices& index, int axis) {
  check_defined(op, x);
  index.check(op);
  const Shape shape = x.shape();
  XGRAD_CHECK(!shape.empty(), op, "needs at least one axis, got a scalar");
  return normalize_axis(op, axis, shape.size(), shape);
}

}  // namespace

Tensor gather(const Tensor& x, int axis, const Indices& index) {
  const std::size_t a = picked_axis("gather", x, index, axis);
  const Shape shape = x.shape();
  XGRAD_CHECK(index.shape.size() == shape.size(), "gather", "index ", index.shape, " must have as many axes as x ",
              shape);
  for (std::size_t d = 0; d < shape.size(); ++d)
    XGRAD_CHECK(d == a || index.shape[d] <= shape[d], "gather", "index ", index.shape, " is larger than x ", shape,
                " along axis ", d);
  check_positions("gather", index, shape[a], shape, a);
  const Shape x_strides = strides_of(shape), index_strides = strides_of(index.shape);
  return pick("gather", x, index.shape, [&](std::size_t i) {
    std::size_t offset = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      const std::size_t coordinate = i / index_strides[d] % index.shape[d];
      offset += (d == a ? static_cast<std::size_t>(index.values[i]) : coordinate) * x_strides[d];
    }
    return offset;
  });
}

Tensor index_select(const Tensor& x, int axis, const Indices& index) {
  const std::size_t a = picked_axis("index_select", x, index, axis);
  const Shape shape = x.shape();
  XGRAD_CHECK(index.shape.size() <= 1, "index_select", "index must be 1-D, got ", index.shape);
  check_positions("index_select", index, shape[a], shape, a);
  const AxisBlocks b = blocks_around(shape, a);
  Shape out_shape = shape;
  out_shape[a] = index.numel();
  const std::size_t picked = index.numel();
  return pick("index_select", x, out_shape, [&](std::size_t i) {
    const std::size_t inner = i % b.inner, position = i / b.inner % picked, outer = i / (b.inner * picked);
    return (outer * b.n + static_cast<std::size_t>(index.values[position])) * b.inner + inner;
  });
}

Indices to_indices(const Tensor& t) {
  check_defined("to_indices", t);
  const std::vector<double> values = t.to_vector();
  std::vector<std::int64_t> ids(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    // Whole numbers a float64 holds exactly, so the conversion loses nothing.
    XGRAD_CHECK(values[i] == std::floor(values[i]) && std::abs(values[i]) <= 0x1p53, "to_indices", "element ", i,
                " of ", t.shape(), " is ", values[i], ", not a whole number in [-2^53, 2^53]");
    ids[i] = static_cast<std::int64_t>(values[i]);
  }
  return Indices(std::move(ids), t.shape());
}

Tensor to_tensor(const Indices& ids, DType dtype) {
  ids.check("to_tensor");
  const std::int64_t exact = dtype == DType::float32 ? (std::int64_t{1} << 24) : (std::int64_t{1} << 53);
  std::vector<double> values(ids.numel());
  for (std::size_t i = 0; i < values.size(); ++i) {
    XGRAD_CHECK(ids.values[i] >= -exact && ids.values[i] <= exact, "to_tensor", "id ", ids.values[i], " at position ",
                i, " is not exact in ", dtype_name(dtype));
    values[i] = static_cast<double>(ids.values[i]);
  }
  return Tensor::from_vector(values, ids.shape, dtype);
}

}  // namespace xgrad
