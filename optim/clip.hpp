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

// clip_grad_norm's measure without its scaling: the norm, and the factor it would scale
// the gradients by (1 within max_norm), for Optimizer::step to apply as it reads them.
//
//   opt.step(optim::grad_norm_clip(model.parameters(), 1.0).factor);
//
// is clip_grad_norm(model.parameters(), 1.0) then opt.step(), bit for bit, without the
// pass that writes the scaled gradients (for GPT-2 124M a gigabyte of memory traffic a
// step); the gradients stay as backward left them.
struct GradNormClip {
  double norm;
  double factor;
};
GradNormClip grad_norm_clip(const std::vector<Tensor>& parameters, double max_norm, bool error_if_nonfinite = true);

// Multiplies every gradient by factor (rounded to its dtype), in place.
void scale_grads(const std::vector<Tensor>& parameters, double factor);

// Clamps every gradient element to [-clip, clip].
void clip_grad_value(const std::vector<Tensor>& parameters, double clip);

}  // namespace xgrad::optim
