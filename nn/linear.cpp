#include "xgrad/nn/linear.hpp"

#include <cmath>
#include <typeinfo>

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

Tensor Linear::forward(const Tensor& x) {
  Tensor y = linear(x, weight, bias);
  if (!has_lora()) return y;
  const Tensor adapter_input = dropout(x, lora_.dropout, is_training(), default_generator());
  return y + lora_B->forward(lora_A->forward(adapter_input)) * lora_scaling();
}

void Linear::add_lora(const LoRAOptions& options) {
  XGRAD_CHECK(!has_lora(), "Linear.add_lora", "the layer (", extra_repr(), ") already has a LoRA adapter");
  XGRAD_CHECK(options.rank >= 1, "Linear.add_lora", "rank must be at least 1, got ", options.rank);
  XGRAD_CHECK(std::isfinite(options.alpha) && options.alpha > 0, "Linear.add_lora", "alpha must be positive, got ",
              options.alpha);
  XGRAD_CHECK(options.dropout >= 0.0 && options.dropout < 1.0, "Linear.add_lora", "dropout ", options.dropout,
              " is outside [0, 1)");
  // A starts as a Linear's own weight would; B at zeros, so the adapter adds nothing yet.
  auto a = std::make_shared<Linear>(in_features, options.rank, /*bias=*/false);
  auto b = std::make_shared<Linear>(options.rank, out_features, /*bias=*/false);
  init::zeros_(b->weight);
  a->to(weight.dtype());
  b->to(weight.dtype());
  a->train(is_training());
  b->train(is_training());
  lora_A = register_module("lora_A", a);
  lora_B = register_module("lora_B", b);
  lora_ = options;
  weight.requires_grad_(false);
  if (bias.defined()) bias.requires_grad_(false);
}

void Linear::merge_lora() {
  XGRAD_CHECK(has_lora(), "Linear.merge_lora", "the layer (", extra_repr(), ") has no LoRA adapter");
  {
    NoGradGuard no_grad;
    weight.set_data(weight + matmul(lora_B->weight, lora_A->weight) * lora_scaling());
  }
  remove_module("lora_A");
  remove_module("lora_B");
  lora_A.reset();
  lora_B.reset();
}

const LoRAOptions& Linear::lora_options() const {
  XGRAD_CHECK(has_lora(), "Linear.lora_options", "the layer (", extra_repr(), ") has no LoRA adapter");
  return lora_;
}

double Linear::lora_scaling() const {
  const LoRAOptions& options = lora_options();
  const double rank = static_cast<double>(options.rank);
  return options.alpha / (options.rslora ? std::sqrt(rank) : rank);
}

std::string Linear::extra_repr() const {
  std::string text =
      str("in_features=", in_features, ", out_features=", out_features, ", bias=", bias.defined() ? "true" : "false");
  if (has_lora()) text += str(", lora_rank=", lora_.rank, ", lora_alpha=", lora_.alpha);
  return text;
}

Tensor activated(Linear& linear, Activation activation, const Tensor& x) {
  if (typeid(linear) == typeid(Linear) && !linear.has_lora()) {
    if (activation == Activation::relu) return linear_relu(x, linear.weight, linear.bias);
    return linear_gelu(x, linear.weight, linear.bias, /*approximate=*/activation == Activation::gelu_tanh);
  }
  const Tensor hidden = linear.forward(x);
  return activation == Activation::relu ? relu(hidden)
                                        : gelu(hidden, /*approximate=*/activation == Activation::gelu_tanh);
}

}  // namespace xgrad::nn
