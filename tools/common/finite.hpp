#pragma once
// Weights read from a checkpoint or a Hugging Face folder must be numbers: one NaN or
// infinity makes every later loss, score and sample nonsense, so xgrad-train,
// xgrad-generate and xgrad-export refuse them at once, naming the tensor.

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "xgrad/nn/module.hpp"

namespace tools {

// The name of the model's first tensor (parameter or buffer) holding a NaN or an infinity.
inline std::optional<std::string> first_nonfinite(const xgrad::nn::Module& model) {
  for (const auto& [name, tensor] : model.state_dict()) {
    const auto finite = [&](const auto* values) {
      return std::all_of(values, values + tensor.numel(), [](auto v) { return std::isfinite(v); });
    };
    const bool ok = tensor.dtype() == xgrad::DType::float32 ? finite(tensor.template data<float>())
                                                            : finite(tensor.template data<double>());
    if (!ok) return name;
  }
  return std::nullopt;
}

}  // namespace tools
