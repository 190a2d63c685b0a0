#include "xgrad/nn/init.hpp"

#include <cmath>
#include <string>
#include <utility>

#include "xgrad/autograd/ops.hpp"

namespace xgrad::nn::init {

namespace {
thread_local bool skipping = false;
}

Tensor zeros(std::string_view layer, Shape shape, DType dtype) {
  try {
    // Under SkipInit the values are about to be loaded: not even touched (on a VM, a first
    // touch of a GPT-2 124M's 500 MB took seconds).
    return skipping ? Tensor::empty(std::move(shape), dtype) : Tensor::zeros(std::move(shape), dtype);
  } catch (const Error& e) {
    throw Error(str(layer, ": ", e.what()));
  }
}

Fans fans(const Shape& shape) {
  XGRAD_CHECK(shape.size() >= 2, "init.fans", "needs a tensor of at least 2 dimensions, got ", shape);
  std::size_t receptive = 1;
  for (std::size_t i = 2; i < shape.size(); ++i) receptive *= shape[i];
  return {shape[1] * receptive, shape[0] * receptive};
}

double calculate_gain(Nonlinearity nonlinearity, double negative_slope) {
  switch (nonlinearity) {
    case Nonlinearity::linear:
    case Nonlinearity::sigmoid:
      return 1.0;
    case Nonlinearity::tanh:
      return 5.0 / 3.0;
    case Nonlinearity::relu:
      return std::sqrt(2.0);
    case Nonlinearity::leaky_relu:
      return std::sqrt(2.0 / (1.0 + negative_slope * negative_slope));
  }
  return 1.0;
}

SkipInit::SkipInit() : previous_(skipping) { skipping = true; }
SkipInit::~SkipInit() { skipping = previous_; }

void uniform_(Tensor& t, double low, double high, Generator& gen) {
  if (skipping) return;
  NoGradGuard no_grad;
  t.set_data(Tensor::uniform(t.shape(), low, high, gen, t.dtype()));
}

void normal_(Tensor& t, double mean, double std, Generator& gen) {
  if (skipping) return;
  NoGradGuard no_grad;
  t.set_data(Tensor::normal(t.shape(), mean, std, gen, t.dtype()));
}

void constant_(Tensor& t, double value) {
  if (!skipping) t.set_data(Tensor::full(t.shape(), value, t.dtype()));
}
void zeros_(Tensor& t) { constant_(t, 0.0); }
void ones_(Tensor& t) { constant_(t, 1.0); }

void xavier_uniform_(Tensor& t, double gain, Generator& gen) {
  const Fans f = fans(t.shape());
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(f.in + f.out));
  uniform_(t, -bound, bound, gen);
}

void xavier_normal_(Tensor& t, double gain, Generator& gen) {
  const Fans f = fans(t.shape());
  normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(f.in + f.out)), gen);
}

void kaiming_uniform_(Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity, Generator& gen) {
  const Fans f = fans(t.shape());
  if (t.numel() == 0) return;  // nothing to draw (as PyTorch: a no-op); its fan may be 0
  const std::size_t fan = mode == FanMode::fan_in ? f.in : f.out;
  const double bound = calculate_gain(nonlinearity, a) * std::sqrt(3.0 / static_cast<double>(fan));
  uniform_(t, -bound, bound, gen);
}

}  // namespace xgrad::nn::init
