#include "xgrad/nn/gradcheck.hpp"

namespace xgrad::nn {

bool gradcheck(Module& module, const std::function<Tensor(const std::vector<Tensor>&)>& forward,
               const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  module.to(DType::float64);
  // The inputs (float64 copies) followed by the module's own parameters, checked in place.
  std::vector<Tensor> tensors;
  GradcheckOptions named = options;
  named.input_names.clear();
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    XGRAD_CHECK(inputs[i].defined(), "gradcheck", "input ", i, " is undefined");
    tensors.push_back(inputs[i].detach().to(DType::float64).clone().requires_grad_(inputs[i].requires_grad()));
    named.input_names.push_back(str("input ", i));
  }
  for (auto& [name, parameter] : module.named_parameters()) {
    tensors.push_back(parameter);
    named.input_names.push_back(name);
  }
  const std::size_t n_inputs = inputs.size();
  return gradcheck_in_place(
      [&](const std::vector<Tensor>& all) {
        return forward(std::vector<Tensor>(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n_inputs)));
      },
      tensors, named);
}

}  // namespace xgrad::nn
