#include "autograd/kernels/vexp.hpp"

#include <cmath>

#include <xsimd/xsimd.hpp>

namespace xgrad::kernels {

template <class T>
void exp_shifted_inplace(T* x, std::size_t n, T shift) {
  using batch = xsimd::batch<T>;
  constexpr std::size_t width = batch::size;
  const batch s(shift);
  std::size_t i = 0;
  for (; i + width <= n; i += width) xsimd::exp(batch::load_unaligned(x + i) - s).store_unaligned(x + i);
  for (; i < n; ++i) x[i] = std::exp(x[i] - shift);
}

template void exp_shifted_inplace<float>(float*, std::size_t, float);
template void exp_shifted_inplace<double>(double*, std::size_t, double);

}  // namespace xgrad::kernels
