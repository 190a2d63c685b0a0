#include "xgrad/autograd/kernels/layernorm.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "xgrad/autograd/parallel.hpp"

namespace xgrad::kernels {

namespace {

// Rows are processed in fixed chunks (not per thread), so every result, the reduced
// weight and bias gradients included, is the same whatever the thread count.
constexpr std::size_t kRowsPerChunk = 64;

std::size_t chunks_of(std::size_t rows) { return (rows + kRowsPerChunk - 1) / kRowsPerChunk; }

// The row loops run on xsimd batches: each sum is kept lane by lane and the lanes added
// at the end (a fixed order), so that the float additions run side by side instead of as
// one chain; a row's tail past the last whole batch is added after, element by element.
template <class T>
using Batch = xsimd::batch<T>;

template <class T>
std::size_t whole_batches(std::size_t d) {
  return d - d % Batch<T>::size;
}

// The sum over a row of term(x[j]); term is called with batches, then with the tail's
// scalars.
template <class T, class Term>
T row_sum(const T* x, std::size_t d, Term term) {
  constexpr std::size_t W = Batch<T>::size;
  const std::size_t body = whole_batches<T>(d);
  Batch<T> lanes(T(0));
  for (std::size_t j = 0; j < body; j += W) lanes += term(Batch<T>::load_unaligned(x + j));
  T sum = xsimd::hadd(lanes);
  for (std::size_t j = body; j < d; ++j) sum += term(x[j]);
  return sum;
}

template <class T>
void forward_rows(const T* x, const T* weight, const T* bias, T* y, T* mean, T* rstd, std::size_t first,
                  std::size_t last, std::size_t d, T eps) {
  const T inv_d = T(1) / static_cast<T>(d);
  for (std::size_t r = first; r < last; ++r) {
    const T* xr = x + r * d;
    T* yr = y + r * d;
    const T mu = row_sum(xr, d, [](const auto& v) { return v; }) * inv_d;
    // Two passes: the variance of shifted values does not cancel.
    const T squares = row_sum(xr, d, [mu](const auto& v) { return (v - mu) * (v - mu); });
    const T inv_std = T(1) / std::sqrt(squares * inv_d + eps);
    for (std::size_t j = 0; j < d; ++j) {
      T v = (xr[j] - mu) * inv_std;
      if (weight) v *= weight[j];
      if (bias) v += bias[j];
      yr[j] = v;
    }
    mean[r] = mu;
    rstd[r] = inv_std;
  }
}

template <class T>
void backward_rows(const T* dy, const T* x, const T* weight, const T* mean, const T* rstd, T* dx, T* dweight, T* dbias,
                   std::size_t first, std::size_t last, std::size_t d) {
  constexpr std::size_t W = Batch<T>::size;
  const std::size_t body = whole_batches<T>(d);
  const T inv_d = T(1) / static_cast<T>(d);
  for (std::size_t r = first; r < last; ++r) {
    const T* xr = x + r * d;
    const T* dyr = dy + r * d;
    T* dxr = dx + r * d;
    // With xhat = (x - mean) * rstd and g = dy * weight:
    //   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
    Batch<T> g_lanes(T(0)), g_xhat_lanes(T(0));
    for (std::size_t j = 0; j < body; j += W) {
      const Batch<T> xhat = (Batch<T>::load_unaligned(xr + j) - mean[r]) * rstd[r];
      const Batch<T> dyj = Batch<T>::load_unaligned(dyr + j);
      const Batch<T> g = weight ? dyj * Batch<T>::load_unaligned(weight + j) : dyj;
      g_lanes += g;
      g_xhat_lanes += g * xhat;
      if (dweight) (Batch<T>::load_unaligned(dweight + j) + dyj * xhat).store_unaligned(dweight + j);
      if (dbias) (Batch<T>::load_unaligned(dbias + j) + dyj).store_unaligned(dbias + j);
    }
    T g_sum = xsimd::hadd(g_lanes), g_xhat_sum = xsimd::hadd(g_xhat_lanes);
    for (std::size_t j = body; j < d; ++j) {
      const T xhat = (xr[j] - mean[r]) * rstd[r];
      const T g = weight ? dyr[j] * weight[j] : dyr[j];
      g_sum += g;
      g_xhat_sum += g * xhat;
      if (dweight) dweight[j] += dyr[j] * xhat;
      if (dbias) dbias[j] += dyr[j];
    }
    const T g_mean = g_sum * inv_d, g_xhat_mean = g_xhat_sum * inv_d;
    for (std::size_t j = 0; j < d; ++j) {
      const T xhat = (xr[j] - mean[r]) * rstd[r];
      const T g = weight ? dyr[j] * weight[j] : dyr[j];
      dxr[j] = rstd[r] * (g - g_mean - xhat * g_xhat_mean);
    }
  }
}

template <class T>
void rms_forward_rows(const T* x, const T* weight, T* y, T* rstd, std::size_t first, std::size_t last, std::size_t d,
                      T eps) {
  const T inv_d = T(1) / static_cast<T>(d);
  for (std::size_t r = first; r < last; ++r) {
    const T* xr = x + r * d;
    T* yr = y + r * d;
    const T squares = row_sum(xr, d, [](const auto& v) { return v * v; });
    const T inv_rms = T(1) / std::sqrt(squares * inv_d + eps);
    for (std::size_t j = 0; j < d; ++j) yr[j] = weight ? xr[j] * inv_rms * weight[j] : xr[j] * inv_rms;
    rstd[r] = inv_rms;
  }
}

template <class T>
void rms_backward_rows(const T* dy, const T* x, const T* weight, const T* rstd, T* dx, T* dweight, std::size_t first,
                       std::size_t last, std::size_t d) {
  constexpr std::size_t W = Batch<T>::size;
  const std::size_t body = whole_batches<T>(d);
  const T inv_d = T(1) / static_cast<T>(d);
  for (std::size_t r = first; r < last; ++r) {
    const T* xr = x + r * d;
    const T* dyr = dy + r * d;
    T* dxr = dx + r * d;
    // With xhat = x * rstd and g = dy * weight (no mean to subtract, unlike LayerNorm):
    //   dx = rstd * (g - xhat * mean(g * xhat))
    Batch<T> lanes(T(0));
    for (std::size_t j = 0; j < body; j += W) {
      const Batch<T> xhat = Batch<T>::load_unaligned(xr + j) * rstd[r];
      const Batch<T> dyj = Batch<T>::load_unaligned(dyr + j);
      const Batch<T> g = weight ? dyj * Batch<T>::load_unaligned(weight + j) : dyj;
      lanes += g * xhat;
      if (dweight) (Batch<T>::load_unaligned(dweight + j) + dyj * xhat).store_unaligned(dweight + j);
    }
    T g_xhat_sum = xsimd::hadd(lanes);
    for (std::size_t j = body; j < d; ++j) {
      const T xhat = xr[j] * rstd[r];
      const T g = weight ? dyr[j] * weight[j] : dyr[j];
      g_xhat_sum += g * xhat;
      if (dweight) dweight[j] += dyr[j] * xhat;
    }
    const T g_xhat_mean = g_xhat_sum * inv_d;
    for (std::size_t j = 0; j < d; ++j) {
      const T xhat = xr[j] * rstd[r];
      const T g = weight ? dyr[j] * weight[j] : dyr[j];
      dxr[j] = rstd[r] * (g - xhat * g_xhat_mean);
    }
  }
}

}  // namespace

template <class T>
void layer_norm_forward(const T* x, const T* weight, const T* bias, T* y, T* mean, T* rstd, std::size_t rows,
                        std::size_t d, T eps) {
  parallel_for(chunks_of(rows), 8.0 * kRowsPerChunk * d, [&](std::size_t c) {
    forward_rows(x, weight, bias, y, mean, rstd, c * kRowsPerChunk, std::min(rows, (c + 1) * kRowsPerChunk), d, eps);
  });
}

template <class T>
void layer_norm_backward(const T* dy, const T* x, const T* weight, const T* mean, const T* rstd, T* dx, T* dweight,
                         T* dbias, std::size_t rows, std::size_t d) {
  // Each chunk sums its own weight/bias gradients; they are added in chunk order after.
  const std::size_t chunks = chunks_of(rows);
  std::vector<T> partial_w(dweight ? chunks * d : 0, T(0)), partial_b(dbias ? chunks * d : 0, T(0));
  parallel_for(chunks, 12.0 * kRowsPerChunk * d, [&](std::size_t c) {
    backward_rows(dy, x, weight, mean, rstd, dx, dweight ? partial_w.data() + c * d : nullptr,
                  dbias ? partial_b.data() + c * d : nullptr, c * kRowsPerChunk,
                  std::min(rows, (c + 1) * kRowsPerChunk), d);
  });
  for (std::size_t c = 0; c < chunks; ++c)
    for (std::size_t j = 0; j < d; ++j) {
      if (dweight) dweight[j] += partial_w[c * d + j];
      if (dbias) dbias[j] += partial_b[c * d + j];
    }
}

template <class T>
void rms_norm_forward(const T* x, const T* weight, T* y, T* rstd, std::size_t rows, std::size_t d, T eps) {
  parallel_for(chunks_of(rows), 6.0 * kRowsPerChunk * d, [&](std::size_t c) {
    rms_forward_rows(x, weight, y, rstd, c * kRowsPerChunk, std::min(rows, (c + 1) * kRowsPerChunk), d, eps);
  });
}

template <class T>
void rms_norm_backward(const T* dy, const T* x, const T* weight, const T* rstd, T* dx, T* dweight, std::size_t rows,
                       std::size_t d) {
  // Per-chunk weight gradients added in chunk order, as layer_norm_backward.
  const std::size_t chunks = chunks_of(rows);
  std::vector<T> partial_w(dweight ? chunks * d : 0, T(0));
  parallel_for(chunks, 10.0 * kRowsPerChunk * d, [&](std::size_t c) {
    rms_backward_rows(dy, x, weight, rstd, dx, dweight ? partial_w.data() + c * d : nullptr, c * kRowsPerChunk,
                      std::min(rows, (c + 1) * kRowsPerChunk), d);
  });
  if (dweight)
    for (std::size_t c = 0; c < chunks; ++c)
      for (std::size_t j = 0; j < d; ++j) dweight[j] += partial_w[c * d + j];
}

#define XGRAD_INSTANTIATE(T)                                                                                      \
  template void layer_norm_forward<T>(const T*, const T*, const T*, T*, T*, T*, std::size_t, std::size_t, T);     \
  template void layer_norm_backward<T>(const T*, const T*, const T*, const T*, const T*, T*, T*, T*, std::size_t, \
                                       std::size_t);                                                              \
  template void rms_norm_forward<T>(const T*, const T*, T*, T*, std::size_t, std::size_t, T);                     \
  template void rms_norm_backward<T>(const T*, const T*, const T*, const T*, T*, T*, std::size_t, std::size_t);
XGRAD_INSTANTIATE(float)
XGRAD_INSTANTIATE(double)
#undef XGRAD_INSTANTIATE

}  // namespace xgrad::kernels
