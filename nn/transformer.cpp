#include "xgrad/nn/transformer.hpp"

#include "xgrad/nn/init.hpp"

namespace xgrad::nn {

namespace {

TransformerLayerOptions sized(std::size_t d_model, std::size_t nhead) {
  TransformerLayerOptions o;
  o.d_model = d_model;
  o.nhead = nhead;
  return o;
}

std::shared_ptr<MultiHeadAttention> attention(const TransformerLayerOptions& o) {
  MultiHeadAttentionOptions a;
  a.embed_dim = o.d_model;
  a.num_heads = o.nhead;
  a.dropout = o.dropout;
  a.bias = o.bias;
  a.batch_first = o.batch_first;
  a.keep_attention = o.keep_attention;
  return std::make_shared<MultiHeadAttention>(a);
}

// linear2(dropout(activation(linear1(x)))), the block both layers end with.
Tensor feed_forward(Linear& linear1, Dropout& dropout, Linear& linear2, Activation activation, const Tensor& x) {
  return linear2.forward(dropout.forward(activated(linear1, activation, x)));
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::relu:
      return "relu";
    case Activation::gelu:
      return "gelu";
    case Activation::gelu_tanh:
      return "gelu_tanh";
  }
  fail("TransformerLayerOptions", "activation ", static_cast<int>(a), " is not relu, gelu or gelu_tanh");
}

// x + block(norm(x)) (pre-LN) or norm(x + block(x)) (post-LN).
template <class Block>
Tensor residual(bool norm_first, LayerNorm& norm, const Tensor& x, Block block) {
  return norm_first ? x + block(norm.forward(x)) : norm.forward(x + block(x));
}

std::string layer_repr(const TransformerLayerOptions& o) {
  return str("d_model=", o.d_model, ", nhead=", o.nhead, ", dim_feedforward=", o.dim_feedforward, ", ",
             activation_name(o.activation), o.norm_first ? ", norm_first" : ", post-LN");
}

}  // namespace

TransformerEncoderLayer::TransformerEncoderLayer(std::size_t d_model, std::size_t nhead)
    : TransformerEncoderLayer(sized(d_model, nhead)) {}

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerEncoderLayerOptions& o) : options_(o) {
  XGRAD_CHECK(o.d_model != 0, "TransformerEncoderLayer", "d_model must be positive");
  self_attn = register_module("self_attn", attention(o));
  linear1 = register_module("linear1", std::make_shared<Linear>(o.d_model, o.dim_feedforward, o.bias));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, o.d_model, o.bias));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src) { return forward(src, AttentionArgs{}); }

Tensor TransformerEncoderLayer::forward(const Tensor& src, const AttentionArgs& args) {
  const Tensor h = residual(options_.norm_first, *norm1, src,
                            [&](const Tensor& x) { return dropout1->forward(self_attn->forward(x, x, x, args)); });
  return residual(options_.norm_first, *norm2, h, [&](const Tensor& x) {
    return dropout2->forward(feed_forward(*linear1, *dropout, *linear2, options_.activation, x));
  });
}

std::string TransformerEncoderLayer::extra_repr() const { return layer_repr(options_); }

TransformerDecoderLayer::TransformerDecoderLayer(std::size_t d_model, std::size_t nhead)
    : TransformerDecoderLayer(sized(d_model, nhead)) {}

TransformerDecoderLayer::TransformerDecoderLayer(const TransformerDecoderLayerOptions& o) : options_(o) {
  XGRAD_CHECK(o.d_model != 0, "TransformerDecoderLayer", "d_model must be positive");
  self_attn = register_module("self_attn", attention(o));
  multihead_attn = register_module("multihead_attn", attention(o));
  linear1 = register_module("linear1", std::make_shared<Linear>(o.d_model, o.dim_feedforward, o.bias));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, o.d_model, o.bias));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps));
  norm3 = register_module("norm3", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout));
  dropout3 = register_module("dropout3", std::make_shared<Dropout>(o.dropout));
}

Tensor TransformerDecoderLayer::forward(const Tensor& tgt, const Tensor& memory, const AttentionArgs& tgt_args,
                                        const AttentionArgs& memory_args) {
  const bool pre = options_.norm_first;
  const Tensor h1 = residual(pre, *norm1, tgt,
                             [&](const Tensor& x) { return dropout1->forward(self_attn->forward(x, x, x, tgt_args)); });
  const Tensor h2 = residual(pre, *norm2, h1, [&](const Tensor& x) {
    return dropout2->forward(multihead_attn->forward(x, memory, memory, memory_args));
  });
  return residual(pre, *norm3, h2, [&](const Tensor& x) {
    return dropout3->forward(feed_forward(*linear1, *dropout, *linear2, options_.activation, x));
  });
}

Tensor TransformerDecoderLayer::forward(const Tensor&) {
  fail("TransformerDecoderLayer", "needs a memory: call forward(tgt, memory, tgt_args, memory_args)");
}

std::string TransformerDecoderLayer::extra_repr() const { return layer_repr(options_); }

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayerOptions& o, std::size_t num_layers,
                                       bool final_norm) {
  layers = register_module("layers", std::make_shared<Sequential>());
  for (std::size_t i = 0; i < num_layers; ++i) layers->push_back(std::make_shared<TransformerEncoderLayer>(o));
  if (final_norm) norm = register_module("norm", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps));
}

Tensor TransformerEncoder::forward(const Tensor& src) { return forward(src, AttentionArgs{}); }

Tensor TransformerEncoder::forward(const Tensor& src, const AttentionArgs& args) {
  Tensor x = src;
  for (std::size_t i = 0; i < num_layers(); ++i) x = layer(i).forward(x, args);
  return norm ? norm->forward(x) : x;
}

TransformerEncoderLayer& TransformerEncoder::layer(std::size_t i) const {
  return dynamic_cast<TransformerEncoderLayer&>((*layers)[i]);
}

TransformerDecoder::TransformerDecoder(const TransformerDecoderLayerOptions& o, std::size_t num_layers,
                                       bool final_norm) {
  layers = register_module("layers", std::make_shared<Sequential>());
  for (std::size_t i = 0; i < num_layers; ++i) layers->push_back(std::make_shared<TransformerDecoderLayer>(o));
  if (final_norm) norm = register_module("norm", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps));
}

Tensor TransformerDecoder::forward(const Tensor& tgt, const Tensor& memory, const AttentionArgs& tgt_args,
                                   const AttentionArgs& memory_args) {
  Tensor x = tgt;
  for (std::size_t i = 0; i < num_layers(); ++i) x = layer(i).forward(x, memory, tgt_args, memory_args);
  return norm ? norm->forward(x) : x;
}

Tensor TransformerDecoder::forward(const Tensor&) {
  fail("TransformerDecoder", "needs a memory: call forward(tgt, memory, tgt_args, memory_args)");
}

TransformerDecoderLayer& TransformerDecoder::layer(std::size_t i) const {
  return dynamic_cast<TransformerDecoderLayer&>((*layers)[i]);
}

Transformer::Transformer(const TransformerOptions& o) : options_(o) {
  encoder = register_module("encoder", std::make_shared<TransformerEncoder>(o, o.num_encoder_layers, true));
  decoder = register_module("decoder", std::make_shared<TransformerDecoder>(o, o.num_decoder_layers, true));
  for (auto& [name, p] : named_parameters())
    if (p.dim() > 1) init::xavier_uniform_(p);  // as nn.Transformer._reset_parameters
}

Tensor Transformer::forward(const Tensor& src, const Tensor& tgt, const AttentionArgs& src_args,
                            const AttentionArgs& tgt_args, const AttentionArgs& memory_args) {
  return decoder->forward(tgt, encoder->forward(src, src_args), tgt_args, memory_args);
}

Tensor Transformer::forward(const Tensor&) {
  fail("Transformer", "needs src and tgt: call forward(src, tgt, src_args, tgt_args, memory_args)");
}

}  // namespace xgrad::nn
