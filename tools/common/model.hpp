#pragma once
// The model: token embedding + positions (learned or sinusoidal) + pre-LN encoder layers
// + a Linear head predicting a token at every position. xgrad-train trains it and
// xgrad-bench times it.

#include "xgrad/nn/nn.hpp"

namespace tools {

struct ModelOptions {
  std::size_t vocab = 16, seq_len = 16, d_model = 64, heads = 4, layers = 2;
  std::size_t ff_width = 256;  // the feed-forward layers' inner width
  double dropout = 0.0;
  bool learned_positions = true;  // else sinusoidal
};

class SequenceModel : public xgrad::nn::Module {
 public:
  explicit SequenceModel(const ModelOptions& options);
  xgrad::Tensor forward(const xgrad::Indices& tokens);  // [N, L] -> logits [N, L, vocab]
  xgrad::nn::TransformerEncoderLayer& last_layer() const;

  std::shared_ptr<xgrad::nn::Embedding> tok;
  std::shared_ptr<xgrad::nn::Module> pos;
  std::shared_ptr<xgrad::nn::Sequential> blocks;
  std::shared_ptr<xgrad::nn::Linear> head;
};

}  // namespace tools
