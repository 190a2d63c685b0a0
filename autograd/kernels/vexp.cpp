#include "xgrad/autograd/kernels/vexp.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <xsimd/xsimd.hpp>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace xgrad::kernels {

template <class T>
T exp_shifted_inplace(T* x, std::size_t n, T shift) {
  using batch = xsimd::batch<T>;
  constexpr std::size_t width = batch::size;
  const batch s(shift);
  batch lanes(T(0));
  std::size_t i = 0;
  for (; i + width <= n; i += width) {
    const batch e = xsimd::exp(batch::load_unaligned(x + i) - s);
    e.store_unaligned(x + i);
    lanes += e;
  }
  T sum = xsimd::hadd(lanes);
  for (; i < n; ++i) sum += x[i] = std::exp(x[i] - shift);
  return sum;
}

template <class T>
T exp_shifted_to(const T* x, T* out, std::size_t n, T shift, T offset) {
  using batch = xsimd::batch<T>;
  constexpr std::size_t width = batch::size;
  const batch s(shift), o(offset);
  batch lanes(T(0));
  std::size_t i = 0;
  for (; i + width <= n; i += width) {
    const batch e = xsimd::exp((batch::load_unaligned(x + i) - s) - o);
    e.store_unaligned(out + i);
    lanes += e;
  }
  T sum = xsimd::hadd(lanes);
  for (; i < n; ++i) sum += out[i] = std::exp((x[i] - shift) - offset);
  return sum;
}

template <class T>
T max_of(const T* x, std::size_t n) {
  using batch = xsimd::batch<T>;
  constexpr std::size_t width = batch::size;
  T best = -std::numeric_limits<T>::infinity();
  std::size_t i = 0;
  if (n >= width) {
    batch lanes = batch::load_unaligned(x);
    auto nan = xsimd::isnan(lanes);
    for (i = width; i + width <= n; i += width) {
      const batch v = batch::load_unaligned(x + i);
      lanes = xsimd::max(lanes, v);
      nan = nan || xsimd::isnan(v);
    }
    if (xsimd::any(nan)) return std::numeric_limits<T>::quiet_NaN();
    alignas(64) T lane[width];
    lanes.store_aligned(lane);
    best = *std::max_element(lane, lane + width);
  }
  for (; i < n; ++i) best = max_or_nan(best, x[i]);
  return best;
}

#if defined(__AVX512F__)
namespace {

// float on AVX-512: the same range reduction and polynomial as xsimd's expf (Cephes'),
// with the power of two applied by vscalefps, which also gives 0 on underflow and inf on
// overflow: no compares, no selects, no integer conversion. The input is clamped to
// [-120, 89] first (exp is 0 and inf there; -inf would make k infinite and r NaN), with
// max/min written so that a NaN passes through.
inline __m512 exp16(__m512 v) {
  const __m512 low = _mm512_set1_ps(-120.0f), high = _mm512_set1_ps(89.0f);
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
  const __m512 ln2_hi = _mm512_set1_ps(0.693359375f), ln2_lo = _mm512_set1_ps(-2.12194440e-4f);
  const __m512 c0 = _mm512_set1_ps(5.0000000e-01f), c1 = _mm512_set1_ps(1.6666277e-01f),
               c2 = _mm512_set1_ps(4.1665401e-02f), c3 = _mm512_set1_ps(8.3955629e-03f),
               c4 = _mm512_set1_ps(1.3997796e-03f), one = _mm512_set1_ps(1.0f);
  v = _mm512_min_ps(high, _mm512_max_ps(low, v));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(v, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, ln2_hi, v);
  r = _mm512_fnmadd_ps(k, ln2_lo, r);
  __m512 y = _mm512_fmadd_ps(c4, r, c3);
  y = _mm512_fmadd_ps(y, r, c2);
  y = _mm512_fmadd_ps(y, r, c1);
  y = _mm512_fmadd_ps(y, r, c0);
  const __m512 p = _mm512_add_ps(_mm512_fmadd_ps(y, _mm512_mul_ps(r, r), r), one);
  return _mm512_scalef_ps(p, k);
}

// out[i] = exp((x[i] - shift) - offset), 16 at a time, the tail under a mask; the sum
// lane by lane.
float exp_rows16(const float* x, float* out, std::size_t n, float shift, float offset) {
  const __m512 s = _mm512_set1_ps(shift), o = _mm512_set1_ps(offset);
  const auto shifted = [&](__m512 v) { return exp16(_mm512_sub_ps(_mm512_sub_ps(v, s), o)); };
  __m512 lanes = _mm512_setzero_ps();
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = shifted(_mm512_loadu_ps(x + i));
    _mm512_storeu_ps(out + i, e);
    lanes = _mm512_add_ps(lanes, e);
  }
  if (i < n) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 e = shifted(_mm512_maskz_loadu_ps(tail, x + i));
    _mm512_mask_storeu_ps(out + i, tail, e);
    lanes = _mm512_mask_add_ps(lanes, tail, lanes, e);
  }
  return _mm512_reduce_add_ps(lanes);
}

}  // namespace

// (x - shift) - 0 is x - shift exactly: the same bits as before exp_rows16 took an offset.
template <>
float exp_shifted_inplace<float>(float* x, std::size_t n, float shift) {
  return exp_rows16(x, x, n, shift, 0.0f);
}

template <>
float exp_shifted_to<float>(const float* x, float* out, std::size_t n, float shift, float offset) {
  return exp_rows16(x, out, n, shift, offset);
}
#else
template float exp_shifted_inplace<float>(float*, std::size_t, float);
template float exp_shifted_to<float>(const float*, float*, std::size_t, float, float);
#endif
template double exp_shifted_to<double>(const double*, double*, std::size_t, double, double);
template double exp_shifted_inplace<double>(double*, std::size_t, double);
template float max_of<float>(const float*, std::size_t);
template double max_of<double>(const double*, std::size_t);

}  // namespace xgrad::kernels
