#include "xgrad/nn/normalization.hpp"

#include <algorithm>
#include <cmath>

#include <sstream>

#include "xgrad/autograd/ops.hpp"

namespace xgrad::nn {

namespace {

void check_normalized_shape(const char* layer, const Shape& normalized_shape) {
  XGRAD_CHECK(!normalized_shape.empty(), layer, "normalized_shape must have at least one axis, got []");
}

// The input's trailing axes must be the normalized shape.
void check_input(const char* layer, const Tensor& x, const Shape& normalized_shape) {
  const Shape shape = x.defined() ? x.shape() : Shape{};
  const bool fits = x.defined() && shape.size() >= normalized_shape.size() &&
                    std::equal(normalized_shape.begin(), normalized_shape.end(), shape.end() - normalized_shape.size());
  XGRAD_CHECK(fits, layer, "input ", shape, " does not end in the normalized shape ", normalized_shape);
}

// "4" for one axis (as before multi-axis shapes), "[4, 5]" otherwise.
std::string shape_repr(const Shape& shape) { return shape.size() == 1 ? str(shape[0]) : shape_str(shape); }

}  // namespace

LayerNorm::LayerNorm(std::size_t d, double eps, bool elementwise_affine)
    : LayerNorm(Shape{d}, eps, elementwise_affine) {}

LayerNorm::LayerNorm(Shape shape, double eps, bool elementwise_affine) : normalized_shape(std::move(shape)), eps(eps) {
  check_normalized_shape("LayerNorm", normalized_shape);
  XGRAD_CHECK(eps > 0.0 && std::isfinite(eps), "LayerNorm", "eps must be finite and positive, got ", eps);
  if (elementwise_affine) {
    weight = register_parameter("weight", Tensor::ones(normalized_shape));
    bias = register_parameter("bias", Tensor::zeros(normalized_shape));
  }
}

Tensor LayerNorm::forward(const Tensor& x) {
  check_input("LayerNorm", x, normalized_shape);
  return layer_norm(x, normalized_shape, weight, bias, eps);
}

std::string LayerNorm::extra_repr() const {
  std::ostringstream os;
  os << shape_repr(normalized_shape) << ", eps=" << eps
     << ", elementwise_affine=" << (weight.defined() ? "true" : "false");
  return os.str();
}

RMSNorm::RMSNorm(std::size_t d, std::optional<double> eps, bool elementwise_affine)
    : RMSNorm(Shape{d}, eps, elementwise_affine) {}

RMSNorm::RMSNorm(Shape shape, std::optional<double> eps, bool elementwise_affine)
    : normalized_shape(std::move(shape)), eps(eps) {
  check_normalized_shape("RMSNorm", normalized_shape);
  XGRAD_CHECK(!eps || (*eps > 0.0 && std::isfinite(*eps)), "RMSNorm", "eps must be finite and positive, got ",
              eps.value_or(0.0));
  if (elementwise_affine) weight = register_parameter("weight", Tensor::ones(normalized_shape));
}

Tensor RMSNorm::forward(const Tensor& x) {
  check_input("RMSNorm", x, normalized_shape);
  return rms_norm(x, normalized_shape, weight, eps);
}

std::string RMSNorm::extra_repr() const {
  std::ostringstream os;
  os << shape_repr(normalized_shape) << ", eps=";
  if (eps)
    os << *eps;
  else
    os << "None";  // the dtype's machine epsilon, as PyTorch prints it
  os << ", elementwise_affine=" << (weight.defined() ? "true" : "false");
  return os.str();
}

}  // namespace xgrad::nn
