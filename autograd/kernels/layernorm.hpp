#pragma once
// Layer normalization over contiguous rows of d elements:
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

}  // namespace xgrad::kernels
