#include "xgrad/autograd/kernels/rope.hpp"

#include <algorithm>
#include <cmath>

#include "xgrad/autograd/parallel.hpp"

namespace xgrad::kernels {

namespace {

// The pool's cost estimates: a rotated element is two products and a sum, a table entry a
// cos and a sin in double. Speed only: every element is computed on its own.
constexpr double kWorkPerElement = 4;
constexpr double kWorkPerAngle = 40;

// One head's columns, from `in` into `out`: y = x1 cos - x2 sin, x2 cos + x1 sin.
template <class T, bool Add>
void rotate_head(const T* in, T* out, const T* cos, const T* sin, T sign, std::size_t half, std::size_t head_dim) {
  const T* x1 = in;
  const T* x2 = in + half;
  T* y1 = out;
  T* y2 = out + half;
  for (std::size_t i = 0; i < half; ++i) {
    const T c = cos[i], s = sign * sin[i];
    const T a = x1[i] * c - x2[i] * s, b = x2[i] * c + x1[i] * s;
    if constexpr (Add) {
      y1[i] += a;
      y2[i] += b;
    } else {
      y1[i] = a;
      y2[i] = b;
    }
  }
  for (std::size_t j = 2 * half; j < head_dim; ++j) {  // past rotary_dim: the identity
    if constexpr (Add)
      out[j] += in[j];
    else
      out[j] = in[j];
  }
}

template <class T, bool Add>
void rotate_rows(const RopeRows& r, const T* cos, const T* sin, const T* in, T* out, T sign) {
  const std::size_t half = r.rotary_dim / 2, width = r.heads * r.head_dim;
  const std::size_t rows_per_chunk = std::max<std::size_t>(1, kElementsPerChunk / std::max<std::size_t>(1, width));
  parallel_for_chunks(
      r.rows, rows_per_chunk, kWorkPerElement * static_cast<double>(width), [&](std::size_t begin, std::size_t end) {
        for (std::size_t row = begin; row < end; ++row) {
          const std::size_t t = row % r.length;
          for (std::size_t h = 0; h < r.heads; ++h)
            rotate_head<T, Add>(in + row * r.in_stride + h * r.head_dim, out + row * r.out_stride + h * r.head_dim,
                                cos + t * half, sin + t * half, sign, half, r.head_dim);
        }
      });
}

}  // namespace

template <class T>
void rope_table(const double* frequencies, std::size_t half, std::size_t offset, std::size_t length, T* cos, T* sin) {
  parallel_for(length, kWorkPerAngle * static_cast<double>(half), [&](std::size_t t) {
    // Each angle from its position directly, never summed step by step: position p gets
    // the same angle whatever the offset, so a cached generation's rows match a whole pass.
    const double position = static_cast<double>(offset + t);
    for (std::size_t i = 0; i < half; ++i) {
      const double angle = position * frequencies[i];
      cos[t * half + i] = static_cast<T>(std::cos(angle));
      sin[t * half + i] = static_cast<T>(std::sin(angle));
    }
  });
}

template <class T>
void rope_rotate(const RopeRows& r, const T* cos, const T* sin, const T* in, T* out, bool inverse, bool add) {
  if (r.rows == 0 || r.length == 0) return;
  const T sign = inverse ? T(-1) : T(1);  // exact: turning back is sin's sign flipped
  if (add)
    rotate_rows<T, true>(r, cos, sin, in, out, sign);
  else
    rotate_rows<T, false>(r, cos, sin, in, out, sign);
}

template void rope_table<float>(const double*, std::size_t, std::size_t, std::size_t, float*, float*);
template void rope_table<double>(const double*, std::size_t, std::size_t, std::size_t, double*, double*);
template void rope_rotate<float>(const RopeRows&, const float*, const float*, const float*, float*, bool, bool);
template void rope_rotate<double>(const RopeRows&, const double*, const double*, const double*, double*, bool, bool);

}  // namespace xgrad::kernels
