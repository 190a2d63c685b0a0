#pragma once
// Token embeddings and position information.

#include "xgrad/autograd/ops.hpp"
#include "xgrad/autograd/random.hpp"
#include "xgrad/nn/activation.hpp"
#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

// Embedding(num, d, options): a lookup table [num, d], initialized N(0, 1) as in PyTorch,
// with torch.nn.Embedding's padding_idx, max_norm, norm_type and scale_grad_by_freq
// (EmbeddingOptions, autograd/ops.hpp). The padding row starts at zeros and gets no
// gradient; with max_norm, every forward renormalises the rows it looks up in place.
class Embedding : public Module {
 public:
  Embedding(std::size_t num_embeddings, std::size_t embedding_dim, const EmbeddingOptions& options = {});
  using Module::forward;               // a Tensor of ids is no input: it throws, naming the module
  Tensor forward(const Indices& ids);  // ids [...] -> [..., d]
  Tensor operator()(const Indices& ids) { return forward(ids); }
  std::string extra_repr() const override;

  std::size_t num_embeddings, embedding_dim;
  EmbeddingOptions options;  // padding_idx counted from the start (a negative one converted)
  Tensor weight;
};

// Adds the fixed sinusoids of "Attention Is All You Need" (and the Annotated
// Transformer), then applies dropout:
//   pe[pos, 2i] = sin(pos / 10000^(2i/d)),  pe[pos, 2i+1] = cos(pos / 10000^(2i/d)).
// Positions run along axis -2 of [..., L, d] (batch_first), or axis 0 of [L, N, d].
// The table is a non-persistent buffer: it is rebuilt, never saved.
class PositionalEncoding : public Module {
 public:
  explicit PositionalEncoding(std::size_t d_model, std::size_t max_len = 5000, double dropout = 0.0,
                              bool batch_first = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  std::size_t d_model, max_len;
  bool batch_first;
  Tensor pe;  // [max_len, d_model]
  std::shared_ptr<Dropout> dropout;
};

// Learned positions: a trained table [max_len, d] (N(0, 1) at first) added the same way.
class LearnedPositionalEncoding : public Module {
 public:
  LearnedPositionalEncoding(std::size_t max_len, std::size_t d_model, bool batch_first = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  std::size_t max_len, d_model;
  bool batch_first;
  Tensor weight;
};

}  // namespace xgrad::nn
