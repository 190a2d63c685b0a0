#pragma once
// SIMD (xsimd) row primitives for the hot softmax loops.
//   exp_shifted_inplace: x[i] = exp(x[i] - shift) over n elements; returns their sum.
//     -inf maps to 0, as the scalar std::exp does (masked scores rely on it). float on
//     AVX-512 has an exp of its own (within 1 ulp of std::exp, subnormals kept).
//   exp_shifted_to: out[i] = exp((x[i] - shift) - offset) over n elements, x unchanged;
//     returns their sum (logsumexp's sum with offset 0, cross-entropy's probabilities
//     with offset the row's log-sum).
//   max_of: the largest of n elements (-inf when n is 0; NaN when any element is NaN).
//   max_or_nan: the larger of two numbers, or NaN when either is (std::max drops a NaN).
// Sums and maxima are taken lane by lane, then across lanes: a fixed order, so results
// are deterministic (and differ from a left-to-right sum only in rounding).

#include <cstddef>

namespace xgrad::kernels {

template <class T>
T exp_shifted_inplace(T* x, std::size_t n, T shift);

template <class T>
T exp_shifted_to(const T* x, T* out, std::size_t n, T shift, T offset);

template <class T>
T max_of(const T* x, std::size_t n);

template <class T>
inline T max_or_nan(T a, T b) {
  return (a < b || b != b) ? b : a;
}

}  // namespace xgrad::kernels
