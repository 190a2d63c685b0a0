#pragma once
// Linear(in, out, bias): y = x W^T + b over the last axis, any number of leading axes.
// PyTorch's layout and default initialization: weight [out, in] and bias [out], both
// U(-1/sqrt(in), 1/sqrt(in)).
//
// A LoRA adapter (Hu et al. 2021, as PEFT's lora.Linear) attaches to a Linear in place,
// so a model that holds its projections as shared_ptr<Linear> needs no change:
//   y = x W^T + b + scaling * B(A(dropout(x))),  scaling = alpha / rank
//                                                (alpha / sqrt(rank) with rslora)
// A = lora_A [rank, in] as a Linear's weight (U(-1/sqrt(in), 1/sqrt(in)), from the
// default generator), B = lora_B [out, rank] zeros, so the adapted layer starts equal to
// the base. Both are bias-free child Linears, so their parameters are named
// "<path>.lora_A.weight" and "<path>.lora_B.weight", PEFT's names. add_lora freezes the
// base weight and bias (requires_grad false). nn/lora.hpp adapts whole models.

#include <memory>

#include "xgrad/autograd/random.hpp"
#include "xgrad/nn/activation.hpp"
#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

struct LoRAOptions {
  std::size_t rank = 8;
  double alpha = 8.0;
  double dropout = 0.0;  // on the adapter's input, in training only
  bool rslora = false;   // scale by alpha / sqrt(rank) (PEFT's use_rslora)
};

class Linear : public Module {
 public:
  Linear(std::size_t in_features, std::size_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters(Generator& gen = default_generator());

  // An Error when the layer already has an adapter or the options are out of range
  // (rank 0, alpha not positive, dropout outside [0, 1)). The adapter takes the
  // weight's dtype.
  void add_lora(const LoRAOptions& options);
  // W += scaling * B A, then the adapter is gone (its names with it). The base weight
  // and bias stay frozen: merging changes no parameter's requires_grad.
  void merge_lora();
  bool has_lora() const { return lora_A != nullptr; }
  const LoRAOptions& lora_options() const;  // an Error without an adapter
  double lora_scaling() const;              // likewise

  std::size_t in_features, out_features;
  Tensor weight;
  Tensor bias;                             // undefined without bias
  std::shared_ptr<Linear> lora_A, lora_B;  // null without an adapter

 private:
  LoRAOptions lora_;
};

// activation(linear.forward(x)) through one fused op (linear_relu, linear_gelu: the same
// bits, a pass less over the activations each way) where `linear` is a plain Linear
// without an adapter; a subclass or an adapter runs its own forward, then the activation.
Tensor activated(Linear& linear, Activation activation, const Tensor& x);

}  // namespace xgrad::nn
