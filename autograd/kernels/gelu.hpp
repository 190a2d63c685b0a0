#pragma once
// GELU, fused and in SIMD (xsimd) over n contiguous elements, each computed on its own
// (the bits never depend on how the elements are cut); one pass each way, the inner
// function recomputed in backward rather than kept. The gradient is written to dx, or
// added to it when `add`.
//
// Exact: y = x Phi(x) = x / 2 (1 + erf(x / sqrt 2)); dx = g (Phi(x) + x phi(x)), with
// phi(x) = exp(-x^2 / 2) / sqrt(2 pi). float64 through xsimd's erf; float32 through erfc
// and one exp that phi shares (gelu.cpp), Phi accurate relative to its size out into the
// negative tail, where 1 + erf cancels.
//
// The tanh approximation (GPT-2's "gelu_new", `approximate`), with s = sqrt(2 / pi), c = 0.044715 and
// t = tanh(s (x + c x^3)): y = x / 2 (1 + t); dx = g (1/2 (1 + t) + x / 2 (1 - t^2) s (1 + 3 c x^2)).
// float32 computes 1/2 (1 + t) as the logistic function of 2 s (x + c x^3), which keeps its
// accuracy for x < 0, where 1 + t cancels (gelu.cpp).

#include <cstddef>

namespace xgrad::kernels {

template <class T>
void gelu_forward(const T* x, T* y, std::size_t n, bool approximate);

template <class T>
void gelu_backward(const T* g, const T* x, T* dx, std::size_t n, bool approximate, bool add);

}  // namespace xgrad::kernels
