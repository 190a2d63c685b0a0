#include "xgrad/autograd/kernels/vexp.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <xsimd/xsimd.hpp>

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

template float exp_shifted_inplace<float>(float*, std::size_t, float);
template double exp_shifted_inplace<double>(double*, std::size_t, double);
template float max_of<float>(const float*, std::size_t);
template double max_of<double>(const double*, std::size_t);

}  // namespace xgrad::kernels
