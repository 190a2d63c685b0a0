#pragma once
// Gradient clipping, in place on the parameters' gradients (parameters without one are
// skipped), as torch.nn.utils.

#include <vector>

#include "xgrad/autograd/tensor.hpp"

namespace xgrad::optim {

// Scales every gradient by max_norm / (norm + 1e-6) when the L2 norm over all of them
// exceeds max_norm; returns that norm, measured before clipping. A NaN or infinite norm
// throws (a step on it would silently ruin the parameters), unless error_if_nonfinite is
// false: then, as in PyTorch, the gradients are scaled by that factor all the same
// (NaN for a NaN norm, 0 for an infinite one).
double clip_grad_norm(const std::vector<Tensor>& parameters, double max_norm, bool error_if_nonfinite = true);

// Clamps every gradient element to [-clip, clip].
void clip_grad_value(const std::vector<Tensor>& parameters, double clip);

}  // namespace xgrad::optim
