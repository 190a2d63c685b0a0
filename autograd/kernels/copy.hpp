#pragma once
// Strided copies along the middle axis of a contiguous [outer, n, inner] array: the
// selected positions start, start + step, ... (count of them) as a dense
// [outer, count, inner] array, and back.

#include <cstddef>
#include <vector>

namespace xgrad::kernels {

struct AxisSelection {
  std::size_t outer = 1, n = 1, inner = 1;     // the full array
  std::size_t start = 0, count = 0, step = 1;  // the positions picked along n
};

// dense = full[:, selection, :]
template <class T>
void gather_axis(const T* full, T* dense, const AxisSelection& s);
// full[:, selection, :] = dense (or += dense when accumulate)
template <class T>
void scatter_axis(const T* dense, T* full, const AxisSelection& s, bool accumulate);

// out = x with its axes reordered: out axis i is x's axis perm[i]. Both contiguous.
// When the last axis stays last (a head split or merge) whole rows are copied at once.
template <class T>
void permute_copy(const T* x, T* out, const std::vector<std::size_t>& shape, const std::vector<std::size_t>& perm);

}  // namespace xgrad::kernels
