#include "autograd/kernels/copy.hpp"

#include <algorithm>

namespace xgrad::kernels {

template <class T>
void gather_axis(const T* full, T* dense, const AxisSelection& s) {
  for (std::size_t o = 0; o < s.outer; ++o)
    for (std::size_t j = 0; j < s.count; ++j) {
      const T* from = full + (o * s.n + s.start + j * s.step) * s.inner;
      std::copy_n(from, s.inner, dense + (o * s.count + j) * s.inner);
    }
}

template <class T>
void scatter_axis(const T* dense, T* full, const AxisSelection& s, bool accumulate) {
  for (std::size_t o = 0; o < s.outer; ++o)
    for (std::size_t j = 0; j < s.count; ++j) {
      const T* from = dense + (o * s.count + j) * s.inner;
      T* to = full + (o * s.n + s.start + j * s.step) * s.inner;
      if (accumulate)
        for (std::size_t i = 0; i < s.inner; ++i) to[i] += from[i];
      else
        std::copy_n(from, s.inner, to);
    }
}

template void gather_axis<float>(const float*, float*, const AxisSelection&);
template void gather_axis<double>(const double*, double*, const AxisSelection&);
template void scatter_axis<float>(const float*, float*, const AxisSelection&, bool);
template void scatter_axis<double>(const double*, double*, const AxisSelection&, bool);

}  // namespace xgrad::kernels
