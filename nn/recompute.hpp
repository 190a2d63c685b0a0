#pragma once
// Activation recomputation for a block of a model: nn::recompute(block, x) is
// block.forward(x) whose activations are not kept for backward but computed again there
// (xgrad::recompute, autograd/recompute.hpp: the same gradients, bit for bit, dropout
// included; under NoGradGuard the plain forward). A call, not a wrapper module: the block
// keeps its place and names in the model, so the state dict is the same either way.
//
//   for (auto& block : blocks) x = recompute_blocks ? nn::recompute(*block, x) : block->forward(x);
//
// The block must outlive the backward pass. A block with more inputs calls
// xgrad::recompute with a function of them all.

#include "xgrad/autograd/recompute.hpp"
#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

inline Tensor recompute(Module& block, const Tensor& x) {
  return xgrad::recompute([&block](const std::vector<Tensor>& in) { return block.forward(in[0]); }, {x});
}

}  // namespace xgrad::nn
