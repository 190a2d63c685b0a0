#include "xgrad/nn/loss.hpp"

namespace xgrad::nn {

CrossEntropyLoss::CrossEntropyLoss(std::int64_t ignore_index) { options.ignore_index = ignore_index; }

CrossEntropyLoss::CrossEntropyLoss(const CrossEntropyOptions& o) : options(o) {
  if (options.weight.defined()) options.weight = register_buffer("weight", options.weight);
}

Tensor CrossEntropyLoss::forward(const Tensor& logits, const Indices& targets) {
  return cross_entropy(logits, targets, options);
}

Tensor CrossEntropyLoss::forward(const Tensor& logits, const Tensor& probabilities) {
  return cross_entropy(logits, probabilities, options);
}

std::string CrossEntropyLoss::extra_repr() const {
  static const char* const kReductions[] = {"none", "mean", "sum"};
  std::vector<std::string> parts;
  if (options.ignore_index != -100) parts.push_back(str("ignore_index=", options.ignore_index));
  if (options.reduction != Reduction::mean)
    parts.push_back(str("reduction=", kReductions[static_cast<int>(options.reduction)]));
  if (options.label_smoothing != 0.0) parts.push_back(str("label_smoothing=", options.label_smoothing));
  if (options.class_axis != -1) parts.push_back(str("class_axis=", options.class_axis));
  return listed(parts, ", ");
}

}  // namespace xgrad::nn
