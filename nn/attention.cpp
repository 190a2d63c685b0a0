#include "xgrad/nn/attention.hpp"

#include <sstream>

#include "xgrad/nn/init.hpp"

namespace xgrad::nn {

namespace {

// An attn_mask / attn_bias of shape [L, S], [N, L, S] or [N, H, L, S] as [N, H, L, S]
// (each axis either its full size or 1).
Tensor as_four_axes(const char* what, const Tensor& mask, const Shape& full) {
  const Shape m = mask.shape();
  Shape four;
  if (m.size() == 2)
    four = {1, 1, m[0], m[1]};
  else if (m.size() == 3)
    four = {m[0], 1, m[1], m[2]};
  else if (m.size() == 4)
    four = m;
  for (std::size_t a = 0; a < four.size(); ++a)
    if (four[a] != 1 && four[a] != full[a]) four.clear();
  XGRAD_CHECK(!four.empty(), "MultiHeadAttention", what, " of shape ", m, " does not fit [N, H, L, S] = ", full,
              " (give [L, S], [N, L, S] or [N, H, L, S]; 1 broadcasts)");
  return reshape(mask, four);
}

// 1 where the mask is nonzero, 0 elsewhere, in float32 (masks of any dtype combine).
Tensor truth(const Tensor& mask) { return ne(mask, 0.0).to(DType::float32); }

MultiHeadAttentionOptions sized(std::size_t embed_dim, std::size_t num_heads) {
  MultiHeadAttentionOptions o;
  o.embed_dim = embed_dim;
  o.num_heads = num_heads;
  return o;
}

}  // namespace

MultiHeadAttention::MultiHeadAttention(std::size_t embed_dim, std::size_t num_heads)
    : MultiHeadAttention(sized(embed_dim, num_heads)) {}

MultiHeadAttention::MultiHeadAttention(const MultiHeadAttentionOptions& options) : options_(options) {
  MultiHeadAttentionOptions& o = options_;
  XGRAD_CHECK(o.embed_dim != 0, "MultiHeadAttention", "embed_dim must be positive");
  XGRAD_CHECK(o.num_heads != 0, "MultiHeadAttention", "num_heads must be positive");
  for (std::size_t* width : {&o.dim_k, &o.dim_v, &o.kdim, &o.vdim})
    if (*width == 0) *width = o.embed_dim;
  XGRAD_CHECK(o.dim_k % o.num_heads == 0 && o.dim_v % o.num_heads == 0, "MultiHeadAttention", "num_heads ", o.num_heads,
              " does not divide dim_k ", o.dim_k, " and dim_v ", o.dim_v);
  XGRAD_CHECK(o.dropout >= 0.0 && o.dropout < 1.0, "MultiHeadAttention", "dropout ", o.dropout, " is outside [0, 1)");

  const std::size_t packed = 2 * o.dim_k + o.dim_v;
  if (o.kdim == o.embed_dim && o.vdim == o.embed_dim) {
    in_proj_weight = register_parameter("in_proj_weight", Tensor::zeros({packed, o.embed_dim}));
    init::xavier_uniform_(in_proj_weight);
  } else {
    q_proj_weight = register_parameter("q_proj_weight", Tensor::zeros({o.dim_k, o.embed_dim}));
    k_proj_weight = register_parameter("k_proj_weight", Tensor::zeros({o.dim_k, o.kdim}));
    v_proj_weight = register_parameter("v_proj_weight", Tensor::zeros({o.dim_v, o.vdim}));
    for (Tensor* w : {&q_proj_weight, &k_proj_weight, &v_proj_weight}) init::xavier_uniform_(*w);
  }
  if (o.bias) in_proj_bias = register_parameter("in_proj_bias", Tensor::zeros({packed}));
  if (o.output_projection) {
    out_proj = register_module("out_proj", std::make_shared<Linear>(o.dim_v, o.embed_dim, o.bias));
    if (o.bias) init::zeros_(out_proj->bias);  // as PyTorch
  }
}

std::array<Columns, 3> MultiHeadAttention::project(const Tensor& query, const Tensor& key, const Tensor& value) const {
  const std::size_t dk = options_.dim_k, dv = options_.dim_v;
  const auto bias_rows = [&](std::size_t from, std::size_t to) {
    return in_proj_bias.defined() ? slice(in_proj_bias, 0, from, to) : Tensor();
  };
  if (!in_proj_weight.defined())
    return {Columns{linear(query, q_proj_weight, bias_rows(0, dk))},
            Columns{linear(key, k_proj_weight, bias_rows(dk, 2 * dk))},
            Columns{linear(value, v_proj_weight, bias_rows(2 * dk, 2 * dk + dv))}};
  if (query.node() == key.node() && key.node() == value.node()) {
    // Self-attention: one GEMM projects all three, and the heads are read from it in place.
    const Tensor qkv = linear(query, in_proj_weight, in_proj_bias);
    return {Columns{qkv, 0, dk}, Columns{qkv, dk, dk}, Columns{qkv, 2 * dk, dv}};
  }
  return {Columns{linear(query, slice(in_proj_weight, 0, 0, dk), bias_rows(0, dk))},
          Columns{linear(key, slice(in_proj_weight, 0, dk, 2 * dk), bias_rows(dk, 2 * dk))},
          Columns{linear(value, slice(in_proj_weight, 0, 2 * dk, 2 * dk + dv), bias_rows(2 * dk, 2 * dk + dv))}};
}

AttentionOptions MultiHeadAttention::op_options(const AttentionArgs& args, std::size_t n, std::size_t l,
                                                std::size_t s) {
  const Shape full = {n, options_.num_heads, l, s};
  Tensor keep;  // the product of every keep mask given, as [N|1, H|1, L|1, S|1]
  const auto require = [&keep](const Tensor& mask) { keep = keep.defined() ? keep * truth(mask) : truth(mask); };
  if (args.key_mask.defined()) {
    const Shape expected{n, s};
    XGRAD_CHECK(args.key_mask.shape() == expected, "MultiHeadAttention", "key_mask of shape ", args.key_mask.shape(),
                " is not [N, S] = ", expected);
    require(reshape(args.key_mask, Shape{n, 1, 1, s}));
  }
  if (args.attn_mask.defined()) require(as_four_axes("attn_mask", args.attn_mask, full));
  if (args.seq_first_mask.defined()) {
    const Shape m = args.seq_first_mask.shape();
    XGRAD_CHECK(m.size() == 3 && (m[0] == 1 || m[0] == l) && m[1] == s && (m[2] == 1 || m[2] == n),
                "MultiHeadAttention", "seq_first_mask of shape ", m, " is not [L or 1, S, N or 1] = [", l, ", ", s,
                ", ", n, "]");
    require(unsqueeze(permute(args.seq_first_mask, {2, 0, 1}), 1));
  }
  AttentionOptions o;
  o.mask = keep;
  if (args.attn_bias.defined()) o.additive_mask = as_four_axes("attn_bias", args.attn_bias, full);
  o.is_causal = args.is_causal;
  o.scale = options_.scale;
  o.dropout_p = is_training() ? options_.dropout : 0.0;
  return o;
}

AttentionOutput MultiHeadAttention::attend(const Tensor& query, const Tensor& key, const Tensor& value,
                                           const AttentionArgs& args) {
  for (const Tensor* t : {&query, &key, &value})
    XGRAD_CHECK(t->defined(), "MultiHeadAttention", "query, key and value must be defined");
  const bool batch_first = options_.batch_first;
  if (query.dim() == 2 && key.dim() == 2 && value.dim() == 2) {
    // Unbatched [L, E]: run as a batch of one.
    const int batch_axis = batch_first ? 0 : 1;
    AttentionArgs batched = args;
    if (args.key_mask.defined() && args.key_mask.dim() == 1) batched.key_mask = unsqueeze(args.key_mask, 0);
    AttentionOutput out =
        attend(unsqueeze(query, batch_axis), unsqueeze(key, batch_axis), unsqueeze(value, batch_axis), batched);
    out.output = squeeze(out.output, batch_axis);
    if (out.weights.defined()) out.weights = squeeze(out.weights, 0);
    return out;
  }
  const Shape qs = query.shape(), ks = key.shape(), vs = value.shape();
  const auto describe = [&] {
    return "query " + shape_str(qs) + ", key " + shape_str(ks) + ", value " + shape_str(vs);
  };
  XGRAD_CHECK(qs.size() == 3 && ks.size() == 3 && vs.size() == 3, "MultiHeadAttention", "inputs must be ",
              (batch_first ? "[N, L, E]" : "[L, N, E]"), ": ", describe());
  const std::size_t n = batch_first ? qs[0] : qs[1], l = batch_first ? qs[1] : qs[0];
  const std::size_t s = batch_first ? ks[1] : ks[0];
  XGRAD_CHECK(qs[2] == options_.embed_dim && ks[2] == options_.kdim && vs[2] == options_.vdim, "MultiHeadAttention",
              "feature widths must be embed_dim ", options_.embed_dim, ", kdim ", options_.kdim, ", vdim ",
              options_.vdim, ": ", describe());
  XGRAD_CHECK(ks[0] == vs[0] && ks[1] == vs[1] && (batch_first ? ks[0] : ks[1]) == n, "MultiHeadAttention",
              "batch or key length disagree: ", describe());

  const auto [q, k, v] = project(query, key, value);
  AttentionOptions o = op_options(args, n, l, s);
  o.need_weights = args.need_weights || options_.keep_attention;
  const AttentionOutput r = multi_head_attention(q, k, v, options_.num_heads, batch_first, o);
  AttentionOutput out;
  out.output = out_proj ? out_proj->forward(r.output) : r.output;
  if (options_.keep_attention) last_attention_ = r.weights.detach();  // not the graph behind it
  if (args.need_weights) out.weights = args.average_weights ? mean(r.weights, {1}) : r.weights;
  return out;
}

Tensor MultiHeadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const AttentionArgs& args) {
  return attend(query, key, value, args).output;
}

Tensor MultiHeadAttention::forward(const Tensor& x) { return forward(x, x, x); }

Tensor MultiHeadAttention::last_attention() const {
  XGRAD_CHECK(options_.keep_attention, "MultiHeadAttention",
              "last_attention() needs keep_attention = true in the options");
  XGRAD_CHECK(last_attention_.defined(), "MultiHeadAttention", "last_attention(): no forward has run yet");
  return last_attention_;
}

std::string MultiHeadAttention::extra_repr() const {
  const MultiHeadAttentionOptions& o = options_;
  std::ostringstream os;
  os << "embed_dim=" << o.embed_dim << ", num_heads=" << o.num_heads;
  if (o.dim_k != o.embed_dim || o.dim_v != o.embed_dim) os << ", dim_k=" << o.dim_k << ", dim_v=" << o.dim_v;
  if (o.kdim != o.embed_dim || o.vdim != o.embed_dim) os << ", kdim=" << o.kdim << ", vdim=" << o.vdim;
  if (!o.bias) os << ", bias=false";
  if (o.dropout > 0) os << ", dropout=" << o.dropout;
  if (!o.batch_first) os << ", batch_first=false";
  return os.str();
}

}  // namespace xgrad::nn
