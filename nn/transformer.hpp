#pragma once
// TransformerEncoderLayer, pre-LN as in the benchmark and most modern models:
//   x = x + dropout1(self_attn(norm1(x)))
//   x = x + dropout2(linear2(dropout(activation(linear1(norm2(x))))))
// Submodule names follow PyTorch's nn.TransformerEncoderLayer(norm_first=True), so its
// state dict loads as it is.

#include "xgrad/nn/activation.hpp"
#include "xgrad/nn/attention.hpp"
#include "xgrad/nn/linear.hpp"
#include "xgrad/nn/normalization.hpp"

namespace xgrad::nn {

struct TransformerEncoderLayerOptions {
  std::size_t d_model = 0;
  std::size_t nhead = 1;
  std::size_t dim_feedforward = 2048;
  double dropout = 0.1;
  bool gelu = false;  // activation: ReLU (PyTorch's default) or exact GELU
  double layer_norm_eps = 1e-5;
  bool batch_first = true;
  bool bias = true;
  bool keep_attention = false;  // keep self_attn's last map
};

class TransformerEncoderLayer : public Module {
 public:
  explicit TransformerEncoderLayer(const TransformerEncoderLayerOptions& options);
  Tensor forward(const Tensor& x) override;
  // Masks and causality go to the self-attention (see AttentionArgs).
  Tensor forward(const Tensor& x, const AttentionArgs& args);
  std::string extra_repr() const override;

  std::shared_ptr<MultiHeadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;

 private:
  TransformerEncoderLayerOptions options_;
};

}  // namespace xgrad::nn
