#pragma once
// Rotary position embedding (RoPE) in the rotate-half form of Hugging Face's Llama: in
// each head, column i and column i + half (i < half, half = rotary_dim / 2) are one pair,
// turned by the angle of its row's position; the columns past rotary_dim pass through.

#include <cstddef>

namespace xgrad::kernels {

// Where the rows are: row r (every leading index and position, in memory order) starts at
// r * in_stride in the input and r * out_stride in the output, and sits at table row
// r % length. Each row holds `heads` heads of head_dim columns side by side.
struct RopeRows {
  std::size_t rows = 0, length = 0;
  std::size_t heads = 1, head_dim = 0, rotary_dim = 0;
  std::size_t in_stride = 0, out_stride = 0;
};

// cos and sin [length, half] of the angles (offset + t) * frequencies[i], i < half,
// computed in double, then rounded to T.
template <class T>
void rope_table(const double* frequencies, std::size_t half, std::size_t offset, std::size_t length, T* cos, T* sin);

// out = in with each pair turned by its angle (inverse: by minus its angle, the transpose,
// which is the backward), or added into out when `add`. in and out must not overlap.
template <class T>
void rope_rotate(const RopeRows& r, const T* cos, const T* sin, const T* in, T* out, bool inverse, bool add);

}  // namespace xgrad::kernels
