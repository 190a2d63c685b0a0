// Embedding lookup: gather rows by integer id; backward scatter-adds into those rows.

#include <algorithm>
#include <cmath>
#include <limits>

#include "xgrad/autograd/ops.hpp"
#include "xgrad/autograd/record.hpp"

namespace xgrad {

namespace {

// torch.embedding_renorm_: each distinct row looked up whose norm exceeds max_norm is
// scaled in place by max_norm / (norm + 1e-7). The norm is summed in double, as PyTorch
// reads it (.item<double>()).
template <class T>
void renorm_rows(T* w, const std::vector<std::int64_t>& ids, std::size_t dim, double max_norm, double norm_type) {
  std::vector<std::int64_t> rows = ids;
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  for (const std::int64_t r : rows) {
    T* row = w + static_cast<std::size_t>(r) * dim;
    double norm = 0;
    if (std::isinf(norm_type)) {
      for (std::size_t j = 0; j < dim; ++j) norm = std::max(norm, std::abs(static_cast<double>(row[j])));
    } else if (norm_type == 2.0) {
      for (std::size_t j = 0; j < dim; ++j) norm += static_cast<double>(row[j]) * static_cast<double>(row[j]);
      norm = std::sqrt(norm);
    } else {
      for (std::size_t j = 0; j < dim; ++j) norm += std::pow(std::abs(static_cast<double>(row[j])), norm_type);
      norm = std::pow(norm, 1.0 / norm_type);
    }
    if (norm > max_norm) {
      const T scale = static_cast<T>(max_norm / (norm + 1e-7));
      for (std::size_t j = 0; j < dim; ++j) row[j] *= scale;
    }
  }
}

}  // namespace

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
    dispatch(weight.dtype(), [&](auto tag) {
      using T = decltype(tag);
      renorm_rows(weight.node()->values<T>().data(), ids.values, dim, *options.max_norm, options.norm_type);
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
  return dispatch(weight.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* w = weight.node()->values<T>().data();
    xt::xarray<T> out = xt::xarray<T>::from_shape(to_xshape<T>(out_shape));
    for (std::size_t i = 0; i < ids.numel(); ++i) std::copy_n(w + ids.values[i] * dim, dim, out.data() + i * dim);
    return record<T>("embedding", std::move(out), {weight},
                     [rows = ids.values, dim, padding, row_scale = std::move(row_scale)](BackwardContext<T>& ctx) {
                       T* dw = ctx.grad_buffer(0).data();
                       const T* g = ctx.grad().data();
                       for (std::size_t i = 0; i < rows.size(); ++i) {
                         if (rows[i] == padding) continue;
                         T* target = dw + rows[i] * dim;
                         const T* source = g + i * dim;
                         if (row_scale.empty()) {
                           for (std::size_t j = 0; j < dim; ++j) target[j] += source[j];
                         } else {
                           const T scale = static_cast<T>(row_scale[rows[i]]);
                           for (std::size_t j = 0; j < dim; ++j) target[j] += source[j] * scale;
                         }
                       }
                     });
  });
}

}  // namespace xgrad
