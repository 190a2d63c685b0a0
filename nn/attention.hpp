#pragma once
// MultiHeadAttention: projections + the fused attention op (multi_head_attention, heads read in
// place from the projections) + an output
// projection. It covers every way the five reference write-ups use attention: separate
// query/key width dim_k and value width dim_v split across heads, cross-attention from
// other widths, masks in each of their layouts, dropout on the weights, batch-first or
// sequence-first data, and the last attention map kept for inspection.
//
// Parameters carry PyTorch's nn.MultiheadAttention names and layouts (in_proj_weight,
// or q_proj_weight / k_proj_weight / v_proj_weight when kdim or vdim differ from
// embed_dim; in_proj_bias; out_proj.weight, out_proj.bias), so a PyTorch state dict
// loads as it is.
//
// Mask rule, everywhere: nonzero means "may attend". PyTorch's key_padding_mask and
// boolean attn_mask mean the opposite (true = hidden): pass their negation. A float mask
// to add to the scores goes in attn_bias. A query that may attend to no key outputs
// zeros (before the output projection) and passes zero gradient.

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
};

// Per-call inputs besides query, key and value. N batch, H heads, L queries, S keys.
struct AttentionArgs {
  Tensor key_mask;   // [N, S]: nonzero = a real token that may be attended
  Tensor attn_mask;  // [L, S], [N, L, S] or [N, H, L, S] (1 broadcasts): nonzero = may attend
  Tensor attn_bias;  // the same shapes, added to the scores
  // [L or 1, S, N or 1] (query, key, batch): the sequence-first write-up's mask layout.
  Tensor seq_first_mask;
  bool is_causal = false;       // query i sees keys j <= i
  bool need_weights = false;    // also return the attention weights
  bool average_weights = true;  // weights [N, L, S] averaged over heads; else [N, H, L, S]
};

class MultiHeadAttention : public Module {
 public:
  explicit MultiHeadAttention(const MultiHeadAttentionOptions& options);
  MultiHeadAttention(std::size_t embed_dim, std::size_t num_heads);

  // output [N, L, E] (or [L, N, E]; [.., dim_v] without output projection); weights with
  // need_weights (no gradient).
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
  std::shared_ptr<Linear> out_proj;                    // dim_v -> embed_dim (with output_projection)

 private:
  // q, k, v as column ranges: of one fused QKV product in self-attention, else three.
  std::array<Columns, 3> project(const Tensor& query, const Tensor& key, const Tensor& value) const;
  AttentionOptions op_options(const AttentionArgs& args, std::size_t n, std::size_t l, std::size_t s);

  MultiHeadAttentionOptions options_;
  Tensor last_attention_;
};

}  // namespace xgrad::nn
