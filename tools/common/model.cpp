#include "model.hpp"

namespace tools {

using namespace xgrad;

SequenceModel::SequenceModel(const ModelOptions& m) {
  tok = register_module("tok", std::make_shared<nn::Embedding>(m.vocab, m.d_model));
  if (m.learned_positions)
    pos = register_module("pos", std::make_shared<nn::LearnedPositionalEncoding>(m.seq_len, m.d_model));
  else
    pos = register_module("pos", std::make_shared<nn::PositionalEncoding>(m.d_model, m.seq_len));
  blocks = register_module("blocks", std::make_shared<nn::Sequential>());
  for (std::size_t i = 0; i < m.layers; ++i) {
    nn::TransformerEncoderLayerOptions o;
    o.d_model = m.d_model;
    o.nhead = m.heads;
    o.dim_feedforward = m.ff_width;
    o.dropout = m.dropout;
    o.norm_first = true;  // pre-LN, as the benchmark's model
    blocks->push_back(std::make_shared<nn::TransformerEncoderLayer>(o));
  }
  head = register_module("head", std::make_shared<nn::Linear>(m.d_model, m.vocab));
}

Tensor SequenceModel::forward(const Indices& tokens) {
  return head->forward(blocks->forward(pos->forward(tok->forward(tokens))));
}

nn::TransformerEncoderLayer& SequenceModel::last_layer() const {
  return dynamic_cast<nn::TransformerEncoderLayer&>((*blocks)[blocks->size() - 1]);
}

}  // namespace tools
