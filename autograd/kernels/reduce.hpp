#pragma once
// Reductions over any set of axes of a contiguous row-major array, without moving data:
// element (kept i, reduced j) sits at offset kept[i] + reduced[j].

#include <cstddef>
#include <vector>

namespace xgrad::kernels {

struct ReducePlan {
  std::vector<std::size_t> kept;     // offset of each output element's first input element
  std::vector<std::size_t> reduced;  // offsets within one reduced group
  bool innermost_reduced = false;    // last axis reduced: groups are (partly) contiguous
};

ReducePlan make_reduce_plan(const std::vector<std::size_t>& shape, const std::vector<bool>& reduce_axis);

template <class T>
void sum_reduce(const T* x, const ReducePlan& plan, T* out);
// out[i] = max of group i; argmax[i] = offset (into x) of its first maximal element.
template <class T>
void max_reduce(const T* x, const ReducePlan& plan, T* out, std::size_t* argmax);

}  // namespace xgrad::kernels
