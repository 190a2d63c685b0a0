#include "xgrad/nn/linear.hpp"

#include <cmath>

#include "xgrad/autograd/ops.hpp"
#include "xgrad/nn/init.hpp"

namespace xgrad::nn {

Linear::Linear(std::size_t in, std::size_t out, bool with_bias) : in_features(in), out_features(out) {
  weight = register_parameter("weight", init::zeros("Linear", {out, in}));
  if (with_bias) bias = register_parameter("bias", init::zeros("Linear", {out}));
  reset_parameters();
}

void Linear::reset_parameters(Generator& gen) {
  // kaiming_uniform with a = sqrt(5) amounts to U(-1/sqrt(in), 1/sqrt(in)).
  init::kaiming_uniform_(weight, std::sqrt(5.0), init::FanMode::fan_in, init::Nonlinearity::leaky_relu, gen);
  if (bias.defined()) {
    const double bound = in_features ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
    init::uniform_(bias, -bound, bound, gen);
  }
}

Tensor Linear::forward(const Tensor& x) { return linear(x, weight, bias); }

std::string Linear::extra_repr() const {
  return str("in_features=", in_features, ", out_features=", out_features,
             ", bias=", bias.defined() ? "true" : "false");
}

}  // namespace xgrad::nn
