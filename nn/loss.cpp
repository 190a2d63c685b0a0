#include "xgrad/nn/loss.hpp"

#include "xgrad/autograd/ops.hpp"

namespace xgrad::nn {

Tensor CrossEntropyLoss::forward(const Tensor& logits, const Indices& targets) {
  return cross_entropy(logits, targets, ignore_index);
}

std::string CrossEntropyLoss::extra_repr() const {
  return ignore_index == -100 ? "" : str("ignore_index=", ignore_index);
}

}  // namespace xgrad::nn
