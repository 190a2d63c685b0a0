#pragma once
// Activation recomputation (gradient checkpointing), as torch.utils.checkpoint with
// use_reentrant=False: trade compute for memory. recompute(fn, inputs) runs fn without
// recording a graph, so nothing inside it is kept for backward but its inputs and its
// output; when the backward pass reaches the output, fn runs again from the same inputs,
// this time recording, and its graph's backward runs there and then.
//
//   Tensor y = recompute([&block](const std::vector<Tensor>& in) { return block.forward(in[0]); }, {x});
//
// nn::recompute(block, x) (nn/recompute.hpp) is that line for a module.
//
// The gradients are the same bits as fn(inputs)'s: the second run draws the same random
// numbers (every Generator fn drew from is set back to its state before the first run's
// draws, then put back where it was), runs under the autocast precision of the first,
// and its graph's backward adds into the gradients of fn's inputs and of the tensors it
// captured (parameters), once, in the order the plain backward would (a tensor also
// used by an op upstream of fn's inputs may get its sums in another order). Under
// NoGradGuard, or when fn reads no tensor that requires grad, it is plain fn(inputs).
//
// fn must compute the same thing each time (no state changed between the runs: a
// different output shape, other tensors requiring grad read or other generators drawn
// from is an Error), its output must be computed from `inputs` (one that depends on none
// of them is an Error), and fn, with everything it refers to (the block, its generators),
// must outlive the backward pass.

#include <functional>
#include <vector>

#include "xgrad/autograd/tensor.hpp"

namespace xgrad {

using RecomputedFunction = std::function<Tensor(const std::vector<Tensor>& inputs)>;

Tensor recompute(const RecomputedFunction& fn, const std::vector<Tensor>& inputs);

}  // namespace xgrad
