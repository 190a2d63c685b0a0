#pragma once
// Gradient check against central finite differences, as torch.autograd.gradcheck.
//
//   Tensor x = Tensor::randn({3, 4}, gen, DType::float64).requires_grad_();
//   gradcheck([](const std::vector<Tensor>& in) { return tanh(in[0]) * in[0]; }, {x});
//
// The inputs are copied to float64 (the function must keep its inputs' dtype for any
// tensor it makes). Every input with requires_grad is checked: the full Jacobian from
// backward is compared with (f(x + eps) - f(x - eps)) / (2 eps), element by element,
// |analytic - numeric| <= atol + rtol * |numeric|. Then a zero output gradient must
// give zero input gradients, and two backward passes through the same graph must give
// identical gradients. The function must be deterministic (reseed any Generator it uses).

#include <functional>
#include <string>
#include <vector>

#include "xgrad/autograd/tensor.hpp"

namespace xgrad {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  bool check_zero_grad = true;
  bool check_repeat = true;
  bool raise = true;  // throw GradcheckError on failure; otherwise return false
  // Names for the inputs in failure reports ("input 2" without them).
  std::vector<std::string> input_names = {};
};

class GradcheckError : public Error {
 public:
  using Error::Error;
};

using TensorFunction = std::function<Tensor(const std::vector<Tensor>&)>;

// True when every check passes. On failure throws GradcheckError (or returns false when
// options.raise is off) with a report: input, element index, analytic and numeric values.
bool gradcheck(const TensorFunction& f, const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

// The same checks on the given tensors themselves, without copies: each must be a
// float64 leaf. Those with requires_grad are perturbed in place (and restored) and
// their gradients are overwritten. nn::gradcheck uses it on a module's parameters.
bool gradcheck_in_place(const TensorFunction& f, const std::vector<Tensor>& tensors,
                        const GradcheckOptions& options = {});

}  // namespace xgrad
