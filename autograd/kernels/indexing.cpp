#include "xgrad/autograd/kernels/indexing.hpp"

#include <algorithm>
#include <cmath>

#include "xgrad/autograd/parallel.hpp"

namespace xgrad::kernels {

template <class T>
void gather_at(const T* x, const std::size_t* at, std::size_t n, T fill, T* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = at[i] == kNoSource ? fill : x[at[i]];
}

template <class T>
void scatter_at(const T* g, const std::size_t* at, std::size_t n, T* dx, bool accumulate) {
  for (std::size_t i = 0; i < n; ++i) {
    if (at[i] == kNoSource) continue;
    if (accumulate)
      dx[at[i]] += g[i];
    else
      dx[at[i]] = g[i];
  }
}

template <class T>
void nonzero_at(const T* x, const std::size_t* at, std::size_t n, std::uint8_t* truth) {
  for (std::size_t i = 0; i < n; ++i) truth[i] = x[at[i]] != 0;
}

template <class T>
void gather_rows(const T* table, const std::int64_t* ids, std::size_t n, std::size_t dim, T* out) {
  const std::size_t rows_per_task = std::max<std::size_t>(1, kElementsPerChunk / std::max<std::size_t>(dim, 1));
  parallel_for_chunks(n, rows_per_task, static_cast<double>(dim), [&](std::size_t first, std::size_t last) {
    for (std::size_t i = first; i < last; ++i) std::copy_n(table + ids[i] * dim, dim, out + i * dim);
  });
}

template <class T>
void scatter_add_rows(const T* g, const std::int64_t* ids, std::size_t n, std::size_t dim, std::int64_t skip,
                      const double* row_scale, T* dtable) {
  for (std::size_t i = 0; i < n; ++i) {
    if (ids[i] == skip) continue;
    T* target = dtable + ids[i] * dim;
    const T* source = g + i * dim;
    if (!row_scale) {
      for (std::size_t j = 0; j < dim; ++j) target[j] += source[j];
    } else {
      const T scale = static_cast<T>(row_scale[ids[i]]);
      for (std::size_t j = 0; j < dim; ++j) target[j] += source[j] * scale;
    }
  }
}

template <class T>
bool renorm_rows(T* table, const std::vector<std::int64_t>& ids, std::size_t dim, double max_norm, double norm_type) {
  std::vector<std::int64_t> rows = ids;
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  bool changed = false;
  for (const std::int64_t r : rows) {
    T* row = table + static_cast<std::size_t>(r) * dim;
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
      changed = true;
    }
  }
  return changed;
}

template void gather_at<float>(const float*, const std::size_t*, std::size_t, float, float*);
template void gather_at<double>(const double*, const std::size_t*, std::size_t, double, double*);
template void scatter_at<float>(const float*, const std::size_t*, std::size_t, float*, bool);
template void scatter_at<double>(const double*, const std::size_t*, std::size_t, double*, bool);
template void nonzero_at<float>(const float*, const std::size_t*, std::size_t, std::uint8_t*);
template void nonzero_at<double>(const double*, const std::size_t*, std::size_t, std::uint8_t*);
template void gather_rows<float>(const float*, const std::int64_t*, std::size_t, std::size_t, float*);
template void gather_rows<double>(const double*, const std::int64_t*, std::size_t, std::size_t, double*);
template void scatter_add_rows<float>(const float*, const std::int64_t*, std::size_t, std::size_t, std::int64_t,
                                      const double*, float*);
template void scatter_add_rows<double>(const double*, const std::int64_t*, std::size_t, std::size_t, std::int64_t,
                                       const double*, double*);
template bool renorm_rows<float>(float*, const std::vector<std::int64_t>&, std::size_t, double, double);
template bool renorm_rows<double>(double*, const std::vector<std::int64_t>&, std::size_t, double, double);

}  // namespace xgrad::kernels
