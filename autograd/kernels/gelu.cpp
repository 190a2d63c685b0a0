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

template <class T>
struct GeluExact {
  static inline const T kInvSqrt2 = T(1) / std::numbers::sqrt2_v<T>;
  static inline const T kInvSqrt2Pi = T(1) / std::sqrt(T(2) * std::numbers::pi_v<T>);

  template <class V>
  static V forward(V x) {
    return V(T(0.5)) * x * (V(T(1)) + erf_of(x * V(kInvSqrt2)));
  }
  template <class V>
  static V backward(V g, V x) {
    return g * (V(T(0.5)) * (V(T(1)) + erf_of(x * V(kInvSqrt2))) + x * V(kInvSqrt2Pi) * exp_of(V(T(-0.5)) * x * x));
  }
  static T erf_of(T z) { return std::erf(z); }
  static xsimd::batch<T> erf_of(const xsimd::batch<T>& z) { return xsimd::erf(z); }
  static T exp_of(T z) { return std::exp(z); }
  static xsimd::batch<T> exp_of(const xsimd::batch<T>& z) { return xsimd::exp(z); }
};

// y = F::forward(x) over n elements: SIMD batches, then the rest one by one.
template <class F, class T>
void forward_pass(const T* x, T* y, std::size_t n) {
  using batch = xsimd::batch<T>;
  std::size_t i = 0;
  for (; i + batch::size <= n; i += batch::size) F::forward(batch::load_unaligned(x + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] = F::forward(x[i]);
}

// dx = (or +=) F::backward(g, x) over n elements.
template <class F, class T>
void backward_pass(const T* g, const T* x, T* dx, std::size_t n, bool add) {
  using batch = xsimd::batch<T>;
  std::size_t i = 0;
  for (; i + batch::size <= n; i += batch::size) {
    batch d = F::backward(batch::load_unaligned(g + i), batch::load_unaligned(x + i));
    if (add) d += batch::load_unaligned(dx + i);
    d.store_unaligned(dx + i);
  }
  for (; i < n; ++i) {
    const T d = F::backward(g[i], x[i]);
    dx[i] = add ? dx[i] + d : d;
  }
}

}  // namespace

template <class T>
void gelu_forward(const T* x, T* y, std::size_t n, bool approximate) {
  approximate ? forward_pass<GeluTanh<T>>(x, y, n) : forward_pass<GeluExact<T>>(x, y, n);
}

template <class T>
void gelu_backward(const T* g, const T* x, T* dx, std::size_t n, bool approximate, bool add) {
  approximate ? backward_pass<GeluTanh<T>>(g, x, dx, n, add) : backward_pass<GeluExact<T>>(g, x, dx, n, add);
}

template void gelu_forward<float>(const float*, float*, std::size_t, bool);
template void gelu_forward<double>(const double*, double*, std::size_t, bool);
template void gelu_backward<float>(const float*, const float*, float*, std::size_t, bool, bool);
template void gelu_backward<double>(const double*, const double*, double*, std::size_t, bool, bool);

}  // namespace xgrad::kernels
