#pragma once
// x[i] = exp(x[i] - shift) over n elements with SIMD (xsimd), for the hot softmax loops.
// -inf maps to 0, as the scalar std::exp does (masked scores rely on it).

#include <cstddef>

namespace xgrad::kernels {

template <class T>
void exp_shifted_inplace(T* x, std::size_t n, T shift);

}  // namespace xgrad::kernels
