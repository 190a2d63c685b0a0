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
//   Tensor y = cube.apply({x});  // then check it: gradcheck([&](auto& in) { return cube.apply(in); }, {x})
//
// Both run without recording a graph, so they may use any op or write raw loops over
// data<T>(), in the floating-point mode xgrad's own ops run in (float32 flushes
// denormals: autograd/denormals.hpp), so that a recomputed forward gives the same bits.
// They must not keep tensors of a graph (capture plain values only).

#include <concepts>
#include <functional>
#include <string>
#include <type_traits>
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

  // The op on `inputs`, recorded for backward (torch.autograd.Function.apply).
  Tensor apply(const std::vector<Tensor>& inputs) const;
};

// The same as op.apply(inputs). The template takes the calls the plain function would lose
// to std::apply, which a std::vector argument brings into the lookup (a non-const op or
// vector matched it better, and it does not compile for a vector).
inline Tensor apply(const CustomOp& op, const std::vector<Tensor>& inputs) { return op.apply(inputs); }
template <class Op, class Inputs>
requires std::same_as<std::remove_cvref_t<Op>, CustomOp> && std::convertible_to < Inputs&&, const std::vector<Tensor>
& > Tensor apply(Op&& op, Inputs&& inputs) { return op.apply(inputs); }

}  // namespace xgrad
