#include "xgrad/nn/normalization.hpp"

#include <cmath>

#include <sstream>

#include "xgrad/autograd/ops.hpp"

namespace xgrad::nn {

LayerNorm::LayerNorm(std::size_t d, double eps, bool elementwise_affine) : d(d), eps(eps) {
  XGRAD_CHECK(eps > 0.0 && std::isfinite(eps), "LayerNorm", "eps must be finite and positive, got ", eps);
  if (elementwise_affine) {
    weight = register_parameter("weight", Tensor::ones({d}));
    bias = register_parameter("bias", Tensor::zeros({d}));
  }
}

Tensor LayerNorm::forward(const Tensor& x) {
  XGRAD_CHECK(x.defined() && x.dim() != 0 && x.shape().back() == d, "LayerNorm", "input ",
              x.defined() ? x.shape() : Shape{}, " does not end in the normalized size ", d);
  return layer_norm(x, weight, bias, eps);
}

std::string LayerNorm::extra_repr() const {
  std::ostringstream os;
  os << d << ", eps=" << eps << ", elementwise_affine=" << (weight.defined() ? "true" : "false");
  return os.str();
}

}  // namespace xgrad::nn
