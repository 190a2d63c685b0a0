#pragma once
// CrossEntropyLoss: xgrad::cross_entropy as a module, as torch.nn.CrossEntropyLoss. A
// class weight is a buffer named "weight" (in the state dict, converted by to()).

#include "xgrad/autograd/ops.hpp"
#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

class CrossEntropyLoss : public Module {
 public:
  explicit CrossEntropyLoss(std::int64_t ignore_index = -100);
  explicit CrossEntropyLoss(const CrossEntropyOptions& options);
  using Module::forward;  // one tensor is no input: it throws, naming the module
  Tensor forward(const Tensor& logits, const Indices& targets);
  Tensor forward(const Tensor& logits, const Tensor& probabilities);  // soft targets
  Tensor operator()(const Tensor& logits, const Indices& targets) { return forward(logits, targets); }
  Tensor operator()(const Tensor& logits, const Tensor& probabilities) { return forward(logits, probabilities); }
  std::string extra_repr() const override;

  CrossEntropyOptions options;
};

}  // namespace xgrad::nn
