#pragma once
// A differentiable op defined outside xgrad, as torch.autograd.Function: a forward that
// computes the output from plain tensors, and a backward that turns the output's gradient
// into the inputs' gradients.
//
//   CustomOp cube{"cube",
//     [](const std::vector<Tensor>& in) { return in[0] * in[0] * in[0]; },
//     [](const std::vector<Tensor>& in, const Tensor&, const Tensor& grad) {
//       return std::vector<Tensor>{grad * 3.0 * in[0] * in[0]};
//     }};
//   Tensor y = apply(cube, {x});  // then check it: gradcheck([&](auto& in) { return apply(cube, in); }, {x})
//
// Both run without recording a graph, so they may use any op or write raw loops over
// data<T>(). They must not keep tensors of a graph (capture plain values only).

#include <functional>
#include <string>
#include <vector>

#include "xgrad/autograd/tensor.hpp"

namespace xgrad {

struct CustomOp {
  std::string name;  // used in error messages and Tensor::op_name()
  std::function<Tensor(const std::vector<Tensor>& inputs)> forward;
  // One gradient per input, each of that input's shape and dtype, or an undefined
  // Tensor where there is none.
  std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs, const Tensor& output, const Tensor& grad_output)>
      backward;
};

Tensor apply(const CustomOp& op, const std::vector<Tensor>& inputs);

}  // namespace xgrad
