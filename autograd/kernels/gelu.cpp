#include "xgrad/autograd/kernels/gelu.hpp"

#include <cmath>
#include <numbers>

#include <xsimd/xsimd.hpp>

namespace xgrad::kernels {

namespace {

template <class T>
struct GeluTanh {
  static inline const T kScale = std::sqrt(T(2) / std::numbers::pi_v<T>);
  static constexpr T kCubic = T(0.044715);

  // The same arithmetic, in the same order, for a SIMD batch (V = xsimd::batch<T>) and a
  // scalar (V = T).
  template <class V>
  static V forward(V x) {
    const V t = tanh_of(V(kScale) * (x + V(kCubic) * x * x * x));
    return V(T(0.5)) * x * (V(T(1)) + t);
  }
  template <class V>
  static V backward(V g, V x) {
    const V t = tanh_of(V(kScale) * (x + V(kCubic) * x * x * x));
    return g * (V(T(0.5)) * (V(T(1)) + t) +
                V(T(0.5)) * x * (V(T(1)) - t * t) * V(kScale) * (V(T(1)) + V(T(3)) * V(kCubic) * x * x));
  }
  static T tanh_of(T z) { return std::tanh(z); }
  static xsimd::batch<T> tanh_of(const xsimd::batch<T>& z) { return xsimd::tanh(z); }
};

}  // namespace

template <class T>
void gelu_tanh_forward(const T* x, T* y, std::size_t n) {
  using batch = xsimd::batch<T>;
  std::size_t i = 0;
  for (; i + batch::size <= n; i += batch::size)
    GeluTanh<T>::forward(batch::load_unaligned(x + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] = GeluTanh<T>::forward(x[i]);
}

template <class T>
void gelu_tanh_backward(const T* g, const T* x, T* dx, std::size_t n, bool add) {
  using batch = xsimd::batch<T>;
  std::size_t i = 0;
  for (; i + batch::size <= n; i += batch::size) {
    batch d = GeluTanh<T>::backward(batch::load_unaligned(g + i), batch::load_unaligned(x + i));
    if (add) d += batch::load_unaligned(dx + i);
    d.store_unaligned(dx + i);
  }
  for (; i < n; ++i) {
    const T d = GeluTanh<T>::backward(g[i], x[i]);
    dx[i] = add ? dx[i] + d : d;
  }
}

template void gelu_tanh_forward<float>(const float*, float*, std::size_t);
template void gelu_tanh_forward<double>(const double*, double*, std::size_t);
template void gelu_tanh_backward<float>(const float*, const float*, float*, std::size_t, bool);
template void gelu_tanh_backward<double>(const double*, const double*, double*, std::size_t, bool);

}  // namespace xgrad::kernels
