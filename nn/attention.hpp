#pragma once
// MultiHeadAttention: projections, the fused attention op (multi_head_attention, which
// reads the heads in place from the projections) and an output projection. It covers
// every way the five reference write-ups use attention: separate query/key width dim_k
// and value width dim_v split across heads, cross-attention from other widths, masks in
// each of their layouts, dropout on the weights, batch-first or sequence-first data, and
// the last attention map kept for inspection.
//
// Parameters carry PyTorch's nn.MultiheadAttention names and layouts (in_proj_weight,
// or q_proj_weight / k_proj_weight / v_proj_weight when kdim or vdim differ from
// embed_dim; in_proj_bias; out_proj.weight, out_proj.bias), so a PyTorch state dict
// loads as it is.
//
// Masks come in PyTorch's forms under PyTorch's names, with PyTorch's polarity
// (key_padding_mask, attn_mask: nonzero = hidden), float masks added to the scores under
// *_bias names (xgrad has no bool dtype to tell the two forms apart), and xgrad's own rule
// (the Annotated Transformer's: nonzero = may attend) under keep names. All combine: a key
// is hidden if any mask hides it. A query that may attend to no key outputs zeros (before
// the output projection) and passes zero gradient.

#include <array>
#include <optional>

#include "xgrad/autograd/ops.hpp"
#include "xgrad/nn/linear.hpp"
#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

struct MultiHeadAttentionOptions {
  std::size_t embed_dim = 0;
  std::size_t num_heads = 1;
  std::size_t dim_k = 0;  // total query/key width over all heads (0: embed_dim)
  std::size_t dim_v = 0;  // total value width over all heads (0: embed_dim)
  std::size_t kdim = 0;   // width of the key input (0: embed_dim)
  std::size_t vdim = 0;   // width of the value input (0: embed_dim)
  bool bias = true;       // on the input and output projections
  // false: no out_proj; the output is the concatenated heads, width dim_v.
  bool output_projection = true;
  double dropout = 0.0;         // on the attention weights, in training only
  bool batch_first = true;      // [N, L, E]; false: sequence-first [L, N, E]
  bool keep_attention = false;  // keep each forward's map for last_attention()
  std::optional<double> scale;  // default 1 / sqrt(dim_k / num_heads)
  // As PyTorch: learned biases bias_k [1, 1, dim_k] and bias_v [1, 1, dim_v] appended to
  // the projected keys and values as one more key, which every query may attend to.
  bool add_bias_kv = false;
  // As PyTorch: one more key and value of zeros (in each head), which every query may
  // attend to (after the bias key when both are on).
  bool add_zero_attn = false;
};

// Per-call inputs besides query, key and value. N batch, H heads, L queries, S keys.
//
//   form                  shapes                                   nonzero / value means
//   key_padding_mask      [N, S] ([S] unbatched)                   hidden (padding), as PyTorch's bool mask
//   attn_mask             [L, S], [N * H, L, S] or [N, H, L, S]    hidden, as PyTorch's bool mask
//   key_padding_bias      [N, S]                                   added, as PyTorch's float key_padding_mask
//   attn_bias             as attn_mask                             added, as PyTorch's float attn_mask
//   keep_mask             [L, S], [N, L, S] or [N, H, L, S]        may attend (the Annotated Transformer's)
//   seq_first_keep_mask   [L or 1, S, N or 1]                      may attend (the sequence-first write-up's)
//
// In every shape a 1 broadcasts, except PyTorch's 3-D [N * H, L, S]. The PyTorch-polarity
// masks must hold only 0 and 1: a float mask given there by mistake (-inf where hidden)
// is an error pointing to the *_bias form, never a silent inversion.
struct AttentionArgs {
  Tensor key_padding_mask = {};
  Tensor attn_mask = {};
  Tensor key_padding_bias = {};
  Tensor attn_bias = {};
  Tensor keep_mask = {};
  Tensor seq_first_keep_mask = {};
  bool is_causal = false;       // query i sees keys j <= i (and any added bias or zero key)
  bool need_weights = false;    // also return the attention weights (with their gradient)
  bool average_weights = true;  // weights [N, L, S] averaged over heads; else [N, H, L, S]
};

class MultiHeadAttention : public Module {
 public:
  explicit MultiHeadAttention(const MultiHeadAttentionOptions& options);
  MultiHeadAttention(std::size_t embed_dim, std::size_t num_heads);

  // output [N, L, E] (or [L, N, E]; [.., dim_v] without output projection); weights with
  // need_weights, which carry a gradient.
  AttentionOutput attend(const Tensor& query, const Tensor& key, const Tensor& value, const AttentionArgs& args = {});
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value, const AttentionArgs& args = {});
  Tensor forward(const Tensor& x) override;  // self-attention without masks
  // The per-head map [N, H, L, S] of the latest forward, detached (needs keep_attention).
  Tensor last_attention() const;
  // Turns keeping the map on or off (e.g. only for a final visualisation pass).
  void set_keep_attention(bool keep) { options_.keep_attention = keep; }
  std::string extra_repr() const override;

  const MultiHeadAttentionOptions& options() const { return options_; }
  Tensor in_proj_weight;                               // [2 dim_k + dim_v, embed_dim] when kdim == vdim == embed_dim
  Tensor q_proj_weight, k_proj_weight, v_proj_weight;  // otherwise
  Tensor in_proj_bias;                                 // [2 dim_k + dim_v] (with bias)
  Tensor bias_k, bias_v;                               // [1, 1, dim_k], [1, 1, dim_v] (with add_bias_kv)
  std::shared_ptr<Linear> out_proj;                    // dim_v -> embed_dim (with output_projection)

 private:
  // q, k, v as column ranges: of one fused QKV product in self-attention, else three.
  std::array<Columns, 3> project(const Tensor& query, const Tensor& key, const Tensor& value) const;
  // Keys and values with the bias key and the zero key appended (as whole tensors).
  std::array<Columns, 2> extra_keys(const Columns& k, const Columns& v, std::size_t n) const;
  // Every mask as the fused op's keep mask and additive mask; `extra` keys appended after
  // the S given ones are visible to every query.
  AttentionOptions op_options(const AttentionArgs& args, std::size_t n, std::size_t l, std::size_t s,
                              std::size_t extra);

  MultiHeadAttentionOptions options_;
  Tensor last_attention_;
};

}  // namespace xgrad::nn
