#include "model.hpp"

namespace train {

using namespace xgrad;

SequenceModel::SequenceModel(const Config& c) {
  const auto d = static_cast<std::size_t>(c.d_model), length = static_cast<std::size_t>(c.seq_len);
  tok = register_module("tok", std::make_shared<nn::Embedding>(static_cast<std::size_t>(c.vocab), d));
  if (c.positions == "learned")
    pos = register_module("pos", std::make_shared<nn::LearnedPositionalEncoding>(length, d));
  else
    pos = register_module("pos", std::make_shared<nn::PositionalEncoding>(d, length));
  blocks = register_module("blocks", std::make_shared<nn::Sequential>());
  for (int i = 0; i < c.layers; ++i) {
    nn::TransformerEncoderLayerOptions o;
    o.d_model = d;
    o.nhead = static_cast<std::size_t>(c.heads);
    o.dim_feedforward = static_cast<std::size_t>(c.ff_width());
    o.dropout = c.dropout;
    blocks->push_back(std::make_shared<nn::TransformerEncoderLayer>(o));
  }
  head = register_module("head", std::make_shared<nn::Linear>(d, static_cast<std::size_t>(c.vocab)));
}

Tensor SequenceModel::forward(const Indices& tokens) {
  return head->forward(blocks->forward(pos->forward(tok->forward(tokens))));
}

nn::TransformerEncoderLayer& SequenceModel::last_layer() const {
  return dynamic_cast<nn::TransformerEncoderLayer&>((*blocks)[blocks->size() - 1]);
}

}  // namespace train
