#pragma once
// Interop with xtensor: wrap an xt::xarray as a Tensor and read a Tensor as one.
// Kept apart from tensor.hpp so that code which never touches xtensor compiles fast.

#include "autograd/node.hpp"

namespace xgrad {

// A leaf tensor owning `values` (T is float or double).
template <class T>
Tensor from_xarray(xt::xarray<T> values, bool requires_grad = false) {
  return make_leaf(std::move(values), requires_grad);
}

// The tensor's own array, without a copy; T must match its dtype.
template <class T>
const xt::xarray<T>& as_xarray(const Tensor& t) {
  XGRAD_CHECK(t.defined(), "as_xarray", "the tensor is undefined");
  XGRAD_CHECK(t.dtype() == dtype_of<T>(), "as_xarray", "requested ", dtype_of<T>(), " from a ", t.dtype(), " tensor");
  return t.node()->values<T>();
}

// A copy converted to T, whatever the tensor's dtype.
template <class T>
xt::xarray<T> to_xarray(const Tensor& t) {
  return as_xarray<T>(t.detach().to(dtype_of<T>()));
}

}  // namespace xgrad
