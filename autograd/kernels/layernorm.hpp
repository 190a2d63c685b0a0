#pragma once
// Layer normalization over contiguous rows of d elements (the product of the normalized
// trailing axes):
//   y = (x - mean) * rstd * weight + bias,   rstd = 1 / sqrt(var + eps)
// with the biased variance, as PyTorch. weight and bias may be null (no affine part).

#include <cstddef>

namespace xgrad::kernels {

// Writes y and each row's mean and rstd (kept for backward).
template <class T>
void layer_norm_forward(const T* x, const T* weight, const T* bias, T* y, T* mean, T* rstd, std::size_t rows,
                        std::size_t d, T eps);

// Writes dx; adds into dweight and dbias when they are not null.
template <class T>
void layer_norm_backward(const T* dy, const T* x, const T* weight, const T* mean, const T* rstd, T* dx, T* dweight,
                         T* dbias, std::size_t rows, std::size_t d);

// RMS normalization over the same rows, without centring or bias:
//   y = x * rstd * weight,   rstd = 1 / sqrt(mean(x^2) + eps)
// weight may be null. Writes y and each row's rstd.
template <class T>
void rms_norm_forward(const T* x, const T* weight, T* y, T* rstd, std::size_t rows, std::size_t d, T eps);

// Writes dx; adds into dweight when it is not null.
template <class T>
void rms_norm_backward(const T* dy, const T* x, const T* weight, const T* rstd, T* dx, T* dweight, std::size_t rows,
                       std::size_t d);

}  // namespace xgrad::kernels
