#include "xgrad/nn/transformer.hpp"

namespace xgrad::nn {

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerEncoderLayerOptions& o) : options_(o) {
  MultiHeadAttentionOptions attention;
  attention.embed_dim = o.d_model;
  attention.num_heads = o.nhead;
  attention.dropout = o.dropout;
  attention.bias = o.bias;
  attention.batch_first = o.batch_first;
  attention.keep_attention = o.keep_attention;
  self_attn = register_module("self_attn", std::make_shared<MultiHeadAttention>(attention));
  linear1 = register_module("linear1", std::make_shared<Linear>(o.d_model, o.dim_feedforward, o.bias));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, o.d_model, o.bias));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout));
}

Tensor TransformerEncoderLayer::forward(const Tensor& x) { return forward(x, AttentionArgs{}); }

Tensor TransformerEncoderLayer::forward(const Tensor& x, const AttentionArgs& args) {
  const Tensor normed = norm1->forward(x);
  const Tensor h = x + dropout1->forward(self_attn->forward(normed, normed, normed, args));
  const Tensor hidden = linear1->forward(norm2->forward(h));
  const Tensor activated = options_.gelu ? gelu(hidden) : relu(hidden);
  return h + dropout2->forward(linear2->forward(dropout->forward(activated)));
}

std::string TransformerEncoderLayer::extra_repr() const {
  return str("d_model=", options_.d_model, ", nhead=", options_.nhead, ", dim_feedforward=", options_.dim_feedforward,
             options_.gelu ? ", gelu" : ", relu");
}

}  // namespace xgrad::nn
