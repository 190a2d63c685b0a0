#pragma once
// The model: token embedding + positions (learned or sinusoidal) + pre-LN encoder layers
// + a Linear head predicting a token at every position.

#include "config.hpp"
#include "nn/nn.hpp"

namespace train {

class SequenceModel : public xgrad::nn::Module {
 public:
  explicit SequenceModel(const Config& config);
  xgrad::Tensor forward(const xgrad::Indices& tokens);  // [N, L] -> logits [N, L, vocab]
  xgrad::nn::TransformerEncoderLayer& last_layer() const;

  std::shared_ptr<xgrad::nn::Embedding> tok;
  std::shared_ptr<xgrad::nn::Module> pos;
  std::shared_ptr<xgrad::nn::Sequential> blocks;
  std::shared_ptr<xgrad::nn::Linear> head;
};

}  // namespace train
