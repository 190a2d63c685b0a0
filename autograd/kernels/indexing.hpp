#pragma once
// Elements and rows picked by position, and their gradients written back: through offset
// maps (the place of each output element in its source) and through row ids.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace xgrad::kernels {

// An output element with no source (pad's padding).
inline constexpr std::size_t kNoSource = static_cast<std::size_t>(-1);

// out[i] = x[at[i]], or `fill` where at[i] is kNoSource.
template <class T>
void gather_at(const T* x, const std::size_t* at, std::size_t n, T fill, T* out);
// dx[at[i]] += g[i] (or = when not accumulate) for every i that has a source.
template <class T>
void scatter_at(const T* g, const std::size_t* at, std::size_t n, T* dx, bool accumulate);
// truth[i] = x[at[i]] != 0: a mask of either dtype read through a broadcast offset map.
template <class T>
void nonzero_at(const T* x, const std::size_t* at, std::size_t n, std::uint8_t* truth);

// Row i of out (dim elements) = row ids[i] of table, for n ids.
template <class T>
void gather_rows(const T* table, const std::int64_t* ids, std::size_t n, std::size_t dim, T* out);
// The gradient of that: row ids[i] of dtable += row i of g, times row_scale[ids[i]] when
// row_scale is not null; rows whose id is `skip` get nothing.
template <class T>
void scatter_add_rows(const T* g, const std::int64_t* ids, std::size_t n, std::size_t dim, std::int64_t skip,
                      const double* row_scale, T* dtable);
// torch.embedding_renorm_: each distinct row of `ids` whose norm exceeds max_norm is scaled
// in place by max_norm / (norm + 1e-7). The norm is summed in double, as PyTorch reads it
// (.item<double>()). Returns whether any row changed.
template <class T>
bool renorm_rows(T* table, const std::vector<std::int64_t>& ids, std::size_t dim, double max_norm, double norm_type);

}  // namespace xgrad::kernels
