#include "xgrad/nn/activation.hpp"

#include <sstream>

#include "xgrad/autograd/ops.hpp"

namespace xgrad::nn {

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate); }
std::string GELU::extra_repr() const { return approximate ? "approximate=tanh" : ""; }

Tensor Softmax::forward(const Tensor& x) { return softmax(x, axis); }
std::string Softmax::extra_repr() const { return str("axis=", axis); }

Tensor LogSoftmax::forward(const Tensor& x) { return log_softmax(x, axis); }
std::string LogSoftmax::extra_repr() const { return str("axis=", axis); }

Dropout::Dropout(double p, std::shared_ptr<Generator> generator) : p(p), generator(std::move(generator)) {
  XGRAD_CHECK(p >= 0.0 && p < 1.0, "Dropout", "probability p = ", p, " is outside [0, 1)");
}

Tensor Dropout::forward(const Tensor& x) {
  return dropout(x, p, is_training(), generator ? *generator : default_generator());
}

std::string Dropout::extra_repr() const {
  std::ostringstream os;
  os << "p=" << p;
  return os.str();
}

}  // namespace xgrad::nn
