#pragma once
// Elements kept, chosen or overwritten by a mask of bytes (nonzero = set) or by their
// position, and dropout's random mask.

#include <cstddef>
#include <cstdint>

namespace xgrad::kernels {

// where: out[i] = keep[i] ? a[a_at[i]] : b[b_at[i]], the operands read through broadcast
// offset maps.
template <class T>
void select_where(const std::uint8_t* keep, const T* a, const std::size_t* a_at, const T* b, const std::size_t* b_at,
                  std::size_t n, T* out);
// Its gradient to one operand: dx[at[i]] += g[i] wherever keep[i] is `taken` (set or not).
template <class T>
void scatter_add_where(const T* g, const std::uint8_t* keep, bool taken, const std::size_t* at, std::size_t n, T* dx);
// x[i] = value wherever mask[i] is set (masked_fill, and the zeros of its gradient).
template <class T>
void fill_where(const std::uint8_t* mask, std::size_t n, T value, T* x);

// triu / tril over the matrices of the last two axes ([..., rows, cols], n elements in
// all): out = x where column - row >= diagonal (upper) or <= diagonal (not upper), else 0.
template <class T>
void keep_triangle(const T* x, T* out, std::size_t n, std::size_t rows, std::size_t cols, std::int64_t diagonal,
                   bool upper);

// dropout: keep[i] = scale where uniform() (a draw in [0, 1)) >= p, else 0, drawn in
// order of i. Here in the header: the generator is autograd's (random.hpp), above kernels.
template <class T, class Uniform>
void dropout_mask(Uniform&& uniform, double p, T scale, std::size_t n, T* keep) {
  for (std::size_t i = 0; i < n; ++i) keep[i] = uniform() >= p ? scale : T(0);
}

}  // namespace xgrad::kernels
