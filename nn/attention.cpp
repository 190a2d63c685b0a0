#include "xgrad/nn/attention.hpp"

#include <sstream>

#include "xgrad/nn/init.hpp"

namespace xgrad::nn {

namespace {

// A mask of shape [L, S], [N, L, S] (when batch_3d) or [N, H, L, S] as [N, H, L, S]
// (each axis either its full size or 1).
Tensor as_four_axes(const char* what, const Tensor& mask, const Shape& full, bool batch_3d) {
  const Shape m = mask.shape();
  Shape four;
  if (m.size() == 2)
    four = {1, 1, m[0], m[1]};
  else if (m.size() == 3 && batch_3d)
    four = {m[0], 1, m[1], m[2]};
  else if (m.size() == 4)
    four = m;
  for (std::size_t a = 0; a < four.size(); ++a)
    if (four[a] != 1 && four[a] != full[a]) four.clear();
  XGRAD_CHECK(!four.empty(), "MultiHeadAttention", what, " of shape ", m, " does not fit [N, H, L, S] = ", full,
              (batch_3d ? " (give [L, S], [N, L, S] or [N, H, L, S]; 1 broadcasts)"
                        : " (give [L, S], [N * H, L, S] or [N, H, L, S]; 1 broadcasts)"));
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
  if (o.add_bias_kv) {
    bias_k = register_parameter("bias_k", Tensor::zeros({1, 1, o.dim_k}));
    bias_v = register_parameter("bias_v", Tensor::zeros({1, 1, o.dim_v}));
    for (Tensor* b : {&bias_k, &bias_v}) init::xavier_normal_(*b);
  }
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

std::array<Columns, 2> MultiHeadAttention::extra_keys(const Columns& k, const Columns& v, std::size_t n) const {
  const int seq_axis = options_.batch_first ? 1 : 0;
  // One key row per batch entry, shaped like a key at one position.
  const auto row = [&](const Tensor& values, std::size_t width) {
    const Shape shape = options_.batch_first ? Shape{n, 1, width} : Shape{1, n, width};
    return values.defined() ? expand(values, shape) : Tensor::zeros(shape, k.tensor.dtype());
  };
  const auto extended = [&](const Columns& c, const Tensor& bias, std::size_t width) {
    const bool whole = c.begin == 0 && (c.width == 0 || c.width == c.tensor.size(-1));
    std::vector<Tensor> parts{whole ? c.tensor : slice(c.tensor, -1, c.begin, c.begin + width)};
    if (options_.add_bias_kv) parts.push_back(row(bias, width));
    if (options_.add_zero_attn) parts.push_back(row(Tensor(), width));
    return Columns{concat(parts, seq_axis)};
  };
  return {extended(k, bias_k, options_.dim_k), extended(v, bias_v, options_.dim_v)};
}

namespace {

// A PyTorch-polarity mask must be boolean: 0 and 1 only (see AttentionArgs).
void check_boolean(const char* what, const char* bias_name, const Tensor& mask) {
  for (double x : mask.to_vector())
    XGRAD_CHECK(x == 0.0 || x == 1.0, "MultiHeadAttention", what, " holds ", x,
                ": it is PyTorch's boolean form (nonzero = hidden), 0 and 1 only; a float mask to add to the scores "
                "goes in ",
                bias_name);
}

}  // namespace

AttentionOptions MultiHeadAttention::op_options(const AttentionArgs& args, std::size_t n, std::size_t l, std::size_t s,
                                                std::size_t extra) {
  const std::size_t heads = options_.num_heads;
  const Shape full = {n, heads, l, s};
  Tensor keep;  // the product of every mask as 1 = may attend, [N|1, H|1, L|1, S|1]
  Tensor bias;  // the sum of the additive ones
  const auto allow = [&keep](const Tensor& ones_allowed) {
    keep = keep.defined() ? keep * ones_allowed : ones_allowed;
  };
  const auto add = [&bias](const Tensor& given) {  // in float64, whatever each one's dtype
    const Tensor added = given.to(DType::float64);
    bias = bias.defined() ? bias + added : added;
  };
  const auto key_shaped = [&](const char* what, const Tensor& mask) {
    XGRAD_CHECK(mask.shape() == (Shape{n, s}), "MultiHeadAttention", what, " of shape ", mask.shape(),
                " is not [N, S] = [", n, ", ", s, "]");
    return reshape(mask, Shape{n, 1, 1, s});
  };
  // PyTorch's 3-D attn_mask is [N * H, L, S], batch-major.
  const auto torch_shaped = [&](const char* what, const Tensor& mask) {
    const Shape m = mask.shape();
    if (m.size() == 3) {
      XGRAD_CHECK(m[0] == n * heads && m[1] == l && m[2] == s, "MultiHeadAttention", what, " of shape ", m,
                  " is not [N * H, L, S] = [", n * heads, ", ", l, ", ", s,
                  "] (PyTorch's 3-D form; [N, 1, L, S] gives one mask per batch entry)");
      return reshape(mask, full);
    }
    return as_four_axes(what, mask, full, false);
  };
  if (args.key_padding_mask.defined()) {
    check_boolean("key_padding_mask", "key_padding_bias", args.key_padding_mask);
    allow(truth(eq(key_shaped("key_padding_mask", args.key_padding_mask), 0.0)));
  }
  if (args.attn_mask.defined()) {
    check_boolean("attn_mask", "attn_bias", args.attn_mask);
    allow(truth(eq(torch_shaped("attn_mask", args.attn_mask), 0.0)));
  }
  if (args.key_padding_bias.defined()) add(key_shaped("key_padding_bias", args.key_padding_bias));
  if (args.attn_bias.defined()) add(torch_shaped("attn_bias", args.attn_bias));
  if (args.keep_mask.defined()) allow(truth(as_four_axes("keep_mask", args.keep_mask, full, true)));
  if (args.seq_first_keep_mask.defined()) {
    const Shape m = args.seq_first_keep_mask.shape();
    XGRAD_CHECK(m.size() == 3 && (m[0] == 1 || m[0] == l) && m[1] == s && (m[2] == 1 || m[2] == n),
                "MultiHeadAttention", "seq_first_keep_mask of shape ", m, " is not [L or 1, S, N or 1] = [", l, ", ", s,
                ", ", n, "]");
    allow(truth(unsqueeze(permute(args.seq_first_keep_mask, {2, 0, 1}), 1)));
  }
  AttentionOptions o;
  o.is_causal = args.is_causal;
  if (extra > 0) {
    // The appended keys are visible to every query (PyTorch pads its masks with "allowed"):
    // causality becomes a mask over the S given keys, and the masks grow by `extra` columns.
    if (args.is_causal) allow(reshape(tril(Tensor::ones({l, s})), Shape{1, 1, l, s}));
    o.is_causal = false;
    const auto widen = [&](Tensor mask, double value) {
      if (!mask.defined()) return mask;
      if (mask.size(-1) != s) {  // broadcast over the keys: over the S given ones only
        Shape given = mask.shape();
        given.back() = s;
        mask = expand(mask, given);
      }
      return pad(mask, {0, static_cast<std::int64_t>(extra)}, value);
    };
    keep = widen(keep, 1.0);
    bias = widen(bias, 0.0);
  }
  o.mask = keep;
  o.additive_mask = bias;
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
    for (Tensor* key_mask : {&batched.key_padding_mask, &batched.key_padding_bias})
      if (key_mask->defined() && key_mask->dim() == 1) *key_mask = unsqueeze(*key_mask, 0);
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

  auto [q, k, v] = project(query, key, value);
  const std::size_t extra = std::size_t{options_.add_bias_kv} + std::size_t{options_.add_zero_attn};
  if (extra > 0) {  // the heads can no longer be read in place from one projection
    const std::array<Columns, 2> extended = extra_keys(k, v, n);
    k = extended[0];
    v = extended[1];
  }
  AttentionOptions o = op_options(args, n, l, s, extra);
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
  if (o.add_bias_kv) os << ", add_bias_kv=true";
  if (o.add_zero_attn) os << ", add_zero_attn=true";
  return os.str();
}

}  // namespace xgrad::nn
