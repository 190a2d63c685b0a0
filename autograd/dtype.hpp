#pragma once
// The element types a tensor holds. The runtime knows them (errors print them by name);
// autograd/tensor.hpp dispatches over them.

#include <string>

namespace xgrad {

enum class DType { float32, float64 };

inline const char* dtype_name(DType dtype) { return dtype == DType::float32 ? "float32" : "float64"; }

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::float32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::float64;
}

}  // namespace xgrad
