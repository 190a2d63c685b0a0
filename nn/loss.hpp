#pragma once
// CrossEntropyLoss: mean cross-entropy of logits [..., C] against integer targets [...],
// skipping targets equal to ignore_index (see xgrad::cross_entropy).

#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

class CrossEntropyLoss : public Module {
 public:
  explicit CrossEntropyLoss(std::int64_t ignore_index = -100) : ignore_index(ignore_index) {}
  Tensor forward(const Tensor& logits, const Indices& targets);
  Tensor operator()(const Tensor& logits, const Indices& targets) { return forward(logits, targets); }
  std::string extra_repr() const override;

  std::int64_t ignore_index;
};

}  // namespace xgrad::nn
