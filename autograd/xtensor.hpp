#pragma once
// Interop with xtensor: a Tensor from any xtensor expression (copied), and a Tensor's data
// seen as an xtensor expression (in place, no copy). Kept apart from tensor.hpp so that
// code which never touches xtensor compiles fast. Only xtensor's public types cross this
// boundary, never xgrad's internal storage, so the caller's xtensor settings (xsimd on or
// off, any -march) need not match the library's.

#include <algorithm>
#include <type_traits>

#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>

#include "xgrad/autograd/tensor.hpp"

namespace xgrad {

// A leaf tensor holding a copy of `values` (float or double elements).
template <class E>
Tensor from_xarray(const xt::xexpression<E>& values, bool requires_grad = false) {
  using T = std::decay_t<typename E::value_type>;
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "xgrad holds float or double");
  const xt::xarray<T, xt::layout_type::row_major> evaluated = values.derived_cast();
  Tensor t = Tensor::zeros(Shape(evaluated.shape().begin(), evaluated.shape().end()), dtype_of<T>());
  std::copy(evaluated.begin(), evaluated.end(), t.data<T>());
  if (requires_grad) t.requires_grad_();
  return t;
}

// The tensor's data read in place (an adaptor over its buffer: no copy, valid while the
// tensor's data is); T must match its dtype.
template <class T>
auto as_xarray(const Tensor& t) {
  XGRAD_CHECK(t.defined(), "as_xarray", "the tensor is undefined");
  XGRAD_CHECK(t.dtype() == dtype_of<T>(), "as_xarray", "requested ", dtype_of<T>(), " from a ", t.dtype(), " tensor");
  return xt::adapt(t.data<T>(), t.numel(), xt::no_ownership(), t.shape());
}

// A copy converted to T, whatever the tensor's dtype.
template <class T>
xt::xarray<T> to_xarray(const Tensor& t) {
  const Tensor converted = t.detach().to(dtype_of<T>());
  return xt::xarray<T>(as_xarray<T>(converted));
}

}  // namespace xgrad
