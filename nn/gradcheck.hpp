#pragma once
// gradcheck for a whole module: its inputs and every parameter, in float64.

#include <functional>
#include <vector>

#include "xgrad/autograd/gradcheck.hpp"
#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

// Gradient check of a module in float64: converts the module with to(float64) (it stays
// converted), then checks the gradient of forward(inputs) with respect to every input
// that requires grad and every parameter, in place. Reseed any Generator forward uses.
bool gradcheck(Module& module, const std::function<Tensor(const std::vector<Tensor>&)>& forward,
               const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

}  // namespace xgrad::nn
