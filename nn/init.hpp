#pragma once
// Parameter initialization, in place, with PyTorch's formulas (torch.nn.init). Each draws
// from `gen`, by default the process-wide generator (xgrad::manual_seed).

#include "xgrad/autograd/random.hpp"
#include "xgrad/autograd/tensor.hpp"

namespace xgrad::nn::init {

// A new zero-filled parameter or buffer of `layer` ("Linear"): an Error that names the
// layer, then the shape, when the shape cannot be held (past 2^64 bytes or the memory).
// Uninitialised under SkipInit (below).
Tensor zeros(std::string_view layer, Shape shape, DType dtype = DType::float32);

enum class FanMode { fan_in, fan_out };
enum class Nonlinearity { linear, sigmoid, tanh, relu, leaky_relu };

struct Fans {
  std::size_t in = 0, out = 0;
};
// For a weight [out, in, *receptive]: fan_in = in * receptive, fan_out = out * receptive.
Fans fans(const Shape& shape);
// The recommended gain for a nonlinearity (leaky_relu uses negative_slope).
double calculate_gain(Nonlinearity nonlinearity, double negative_slope = 0.01);

// While a SkipInit lives, on its thread, zeros() leaves a new parameter's values
// uninitialised and the initializers below leave tensors as they are, drawing nothing: for
// a model whose every parameter is about to be loaded (models::load_pretrained), as
// transformers' no_init_weights. For a GPT-2 124M, filling and drawing weights only to
// overwrite them took most of a load.
class SkipInit {
 public:
  SkipInit();
  ~SkipInit();
  SkipInit(const SkipInit&) = delete;
  SkipInit& operator=(const SkipInit&) = delete;

 private:
  bool previous_;
};

void uniform_(Tensor& t, double low, double high, Generator& gen = default_generator());
void normal_(Tensor& t, double mean, double std, Generator& gen = default_generator());
void constant_(Tensor& t, double value);
void zeros_(Tensor& t);
void ones_(Tensor& t);
// U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio).
void xavier_uniform_(Tensor& t, double gain = 1.0, Generator& gen = default_generator());
// N(0, s^2) with s = gain * sqrt(2 / (fan_in + fan_out)).
void xavier_normal_(Tensor& t, double gain = 1.0, Generator& gen = default_generator());
// U(-b, b) with b = gain * sqrt(3 / fan) (He et al.); `a` is leaky_relu's slope.
void kaiming_uniform_(Tensor& t, double a = 0.0, FanMode mode = FanMode::fan_in,
                      Nonlinearity nonlinearity = Nonlinearity::leaky_relu, Generator& gen = default_generator());

}  // namespace xgrad::nn::init
