#include "xgrad/autograd/ops/shape_util.hpp"

#include <algorithm>

namespace xgrad {

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  const std::size_t ndim = std::max(a.size(), b.size());
  Shape out(ndim);
  for (std::size_t i = 0; i < ndim; ++i) {
    const std::size_t da = i < ndim - a.size() ? 1 : a[i - (ndim - a.size())];
    const std::size_t db = i < ndim - b.size() ? 1 : b[i - (ndim - b.size())];
    XGRAD_CHECK(da == db || da == 1 || db == 1, op, "shapes ", a, " and ", b, " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

RowBroadcast row_broadcast(const Shape& a, const Shape& b, const Shape& out) {
  for (const std::size_t repeated : {1, 0}) {
    const Shape& whole = repeated == 1 ? a : b;
    const Shape& part = repeated == 1 ? b : a;
    if (whole != out) continue;
    const auto kept = std::find_if(part.begin(), part.end(), [](std::size_t extent) { return extent != 1; });
    const auto rank = static_cast<std::size_t>(part.end() - kept);
    if (rank <= out.size() && std::equal(kept, part.end(), out.end() - static_cast<std::ptrdiff_t>(rank)) &&
        numel(part) > 0)
      return {repeated, numel(part), numel(out) / numel(part)};
  }
  return {};
}

std::vector<bool> unbroadcast_axes(const Shape& from, const Shape& to) {
  const std::size_t leading = from.size() - to.size();
  std::vector<bool> reduce(from.size());
  for (std::size_t i = 0; i < from.size(); ++i) reduce[i] = i < leading || (to[i - leading] == 1 && from[i] != 1);
  return reduce;
}

// Offsets of each output batch's matrix inside a source whose batch shape broadcasts.
std::vector<std::size_t> batch_offsets(const Shape& source_batch, const Shape& out_batch, std::size_t matrix_size) {
  const std::size_t lead = out_batch.size() - source_batch.size();
  std::vector<std::size_t> strides(out_batch.size(), 0);
  std::size_t stride = matrix_size;
  for (std::size_t i = out_batch.size(); i-- > lead;) {
    const std::size_t dim = source_batch[i - lead];
    strides[i] = dim == 1 ? 0 : stride;
    stride *= dim;
  }
  std::vector<std::size_t> offsets(numel(out_batch), 0);
  std::vector<std::size_t> index(out_batch.size(), 0);
  for (std::size_t b = 0; b < offsets.size(); ++b) {
    std::size_t offset = 0;
    for (std::size_t i = 0; i < index.size(); ++i) offset += index[i] * strides[i];
    offsets[b] = offset;
    for (std::size_t i = index.size(); i-- > 0;) {  // next multi-index, row-major
      if (++index[i] < out_batch[i]) break;
      index[i] = 0;
    }
  }
  return offsets;
}

}  // namespace xgrad
