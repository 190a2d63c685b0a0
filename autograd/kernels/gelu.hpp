#pragma once
// GELU's tanh approximation (GPT-2's "gelu_new"), fused and in SIMD (xsimd) over n
// contiguous elements, each computed on its own (the bits never depend on how the
// elements are cut), with s = sqrt(2 / pi), c = 0.044715 and t = tanh(s (x + c x^3)):
//   gelu_tanh_forward:  y = x / 2 (1 + t)
//   gelu_tanh_backward: dx = g (1/2 (1 + t) + x / 2 (1 - t^2) s (1 + 3 c x^2)), written,
//                       or added to dx when `add`
// One pass each, t recomputed in backward rather than kept.

#include <cstddef>

namespace xgrad::kernels {

template <class T>
void gelu_tanh_forward(const T* x, T* y, std::size_t n);

template <class T>
void gelu_tanh_backward(const T* g, const T* x, T* dx, std::size_t n, bool add);

}  // namespace xgrad::kernels
