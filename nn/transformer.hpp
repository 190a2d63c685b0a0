#pragma once
// The transformer layers and stacks of torch.nn, with PyTorch's submodule names, so that
// their state dicts load as they are:
//
//   TransformerEncoderLayer   self-attention, feed forward
//   TransformerDecoderLayer   self-attention, cross-attention to a memory, feed forward
//   TransformerEncoder / TransformerDecoder   num_layers layers ("layers.0", ...) and an
//                                             optional final LayerNorm ("norm")
//   Transformer               encoder + decoder, each with its final norm
//
// norm_first = false (PyTorch's default) is post-LN, x = norm(x + block(x)); true is
// pre-LN, x = x + block(norm(x)). The two have the same parameter names: a state dict
// does not say which one it was trained with, so set norm_first as the model was built.
// One default differs from PyTorch's: batch_first is true, as everywhere in xgrad
// ([N, L, E]; false gives PyTorch's [L, N, E]).
//
// Masks go per attention block as AttentionArgs (see attention.hpp): PyTorch's
// src_mask / tgt_mask / memory_mask are `attn_mask` (bool) or `attn_bias` (float), its
// *_key_padding_mask are `key_padding_mask`, and a causal tgt_mask is `is_causal`.

#include "xgrad/nn/activation.hpp"
#include "xgrad/nn/attention.hpp"
#include "xgrad/nn/linear.hpp"
#include "xgrad/nn/normalization.hpp"
#include "xgrad/nn/sequential.hpp"

namespace xgrad::nn {

// The options every layer shares (PyTorch's constructor arguments).
struct TransformerLayerOptions {
  std::size_t d_model = 0;
  std::size_t nhead = 1;
  std::size_t dim_feedforward = 2048;
  double dropout = 0.1;
  Activation activation = Activation::relu;
  double layer_norm_eps = 1e-5;
  bool batch_first = true;      // xgrad's default; PyTorch's is false
  bool norm_first = false;      // PyTorch's default: post-LN
  bool bias = true;             // on the attention and feed-forward projections
  bool keep_attention = false;  // keep the attention blocks' last maps
};
using TransformerEncoderLayerOptions = TransformerLayerOptions;
using TransformerDecoderLayerOptions = TransformerLayerOptions;

class TransformerEncoderLayer : public Module {
 public:
  explicit TransformerEncoderLayer(const TransformerEncoderLayerOptions& options);
  TransformerEncoderLayer(std::size_t d_model, std::size_t nhead);
  Tensor forward(const Tensor& src) override;
  // `args` go to the self-attention (PyTorch's src_mask, src_key_padding_mask, is_causal).
  Tensor forward(const Tensor& src, const AttentionArgs& args);
  std::string extra_repr() const override;
  const TransformerEncoderLayerOptions& options() const { return options_; }

  std::shared_ptr<MultiHeadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;

 private:
  TransformerEncoderLayerOptions options_;
};

class TransformerDecoderLayer : public Module {
 public:
  explicit TransformerDecoderLayer(const TransformerDecoderLayerOptions& options);
  TransformerDecoderLayer(std::size_t d_model, std::size_t nhead);
  // tgt_args go to the self-attention (tgt_mask, tgt_key_padding_mask: usually causal),
  // memory_args to the cross-attention (memory_mask, memory_key_padding_mask).
  Tensor forward(const Tensor& tgt, const Tensor& memory, const AttentionArgs& tgt_args = {},
                 const AttentionArgs& memory_args = {});
  Tensor forward(const Tensor& x) override;  // an Error: a decoder layer needs a memory
  std::string extra_repr() const override;
  const TransformerDecoderLayerOptions& options() const { return options_; }

  std::shared_ptr<MultiHeadAttention> self_attn, multihead_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2, dropout3;

 private:
  TransformerDecoderLayerOptions options_;
};

// num_layers copies of one layer's options (each with its own parameters), then a final
// LayerNorm when `norm` (PyTorch's norm argument; nn.Transformer always has one).
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(const TransformerEncoderLayerOptions& layer, std::size_t num_layers, bool norm = false);
  Tensor forward(const Tensor& src) override;
  Tensor forward(const Tensor& src, const AttentionArgs& args);  // the same args for every layer
  TransformerEncoderLayer& layer(std::size_t i) const;
  std::size_t num_layers() const { return layers->size(); }

  std::shared_ptr<Sequential> layers;
  std::shared_ptr<LayerNorm> norm;  // null without a final norm
};

class TransformerDecoder : public Module {
 public:
  TransformerDecoder(const TransformerDecoderLayerOptions& layer, std::size_t num_layers, bool norm = false);
  Tensor forward(const Tensor& tgt, const Tensor& memory, const AttentionArgs& tgt_args = {},
                 const AttentionArgs& memory_args = {});
  Tensor forward(const Tensor& x) override;  // an Error: a decoder needs a memory
  TransformerDecoderLayer& layer(std::size_t i) const;
  std::size_t num_layers() const { return layers->size(); }

  std::shared_ptr<Sequential> layers;
  std::shared_ptr<LayerNorm> norm;
};

// PyTorch's nn.Transformer defaults (d_model 512, 8 heads, 6 + 6 layers, ...), batch-first:
// every layer's options (as a layer's, only the width and heads default differently),
// and the two depths.
struct TransformerOptions : TransformerLayerOptions {
  TransformerOptions() {
    d_model = 512;
    nhead = 8;
  }
  std::size_t num_encoder_layers = 6;
  std::size_t num_decoder_layers = 6;
};

// The encoder-decoder of "Attention Is All You Need" without embeddings or generator:
// encoder (with its final norm) over src, decoder (with its own) over tgt and the
// encoder's output. Every weight matrix is re-drawn Xavier-uniform, as PyTorch does.
class Transformer : public Module {
 public:
  explicit Transformer(const TransformerOptions& options = {});
  // src_args: the encoder's self-attention (src_mask, src_key_padding_mask); tgt_args:
  // the decoder's self-attention; memory_args: its cross-attention (PyTorch's
  // memory_mask, memory_key_padding_mask, usually src_key_padding_mask again).
  Tensor forward(const Tensor& src, const Tensor& tgt, const AttentionArgs& src_args = {},
                 const AttentionArgs& tgt_args = {}, const AttentionArgs& memory_args = {});
  Tensor forward(const Tensor& x) override;  // an Error: a transformer needs src and tgt
  const TransformerOptions& options() const { return options_; }

  std::shared_ptr<TransformerEncoder> encoder;
  std::shared_ptr<TransformerDecoder> decoder;

 private:
  TransformerOptions options_;
};

}  // namespace xgrad::nn
