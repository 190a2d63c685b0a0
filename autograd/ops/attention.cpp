// The fused scaled dot-product attention op: shape checks and mask broadcasting here,
// the blocked online-softmax loops in kernels/attention.cpp.

#include <array>
#include <cmath>
#include <type_traits>

#include "xgrad/autograd/kernels/attention.hpp"
#include "xgrad/autograd/ops.hpp"
#include "xgrad/autograd/ops/shape_util.hpp"
#include "xgrad/autograd/precision.hpp"
#include "xgrad/autograd/random.hpp"

namespace xgrad {

namespace {

// The kernel's name, which the profiler shows for both entry points; errors name the
// entry point the caller used.
constexpr const char* kOp = "scaled_dot_product_attention";
constexpr const char* kMultiHeadOp = "multi_head_attention";

// A mask padded to at least two axes: its batch axes and the [rows, cols] it spreads
// over each [Lq, Lk] score matrix (each either 1 or the full size).
struct MaskLayout {
  Shape batch;
  std::size_t rows = 1, cols = 1;
};

MaskLayout mask_layout(const char* op, const char* what, const Tensor& mask, std::size_t lq, std::size_t lk) {
  Shape shape = mask.shape();
  while (shape.size() < 2) shape.insert(shape.begin(), 1);
  MaskLayout m{Shape(shape.begin(), shape.end() - 2), shape[shape.size() - 2], shape.back()};
  XGRAD_CHECK((m.rows == 1 || m.rows == lq) && (m.cols == 1 || m.cols == lk), op, what, " of shape ", mask.shape(),
              " does not broadcast to the scores [..., ", lq, ", ", lk, "]");
  return m;
}

template <class V>
kernels::BroadcastMask<V> mask_view(const V* data, const MaskLayout& m, const Shape& batch) {
  kernels::BroadcastMask<V> view;
  view.data = data;
  view.batch_offset = batch_offsets(m.batch, batch, m.rows * m.cols);
  view.row_stride = m.rows == 1 ? 0 : m.cols;
  view.col_stride = m.cols == 1 ? 0 : 1;
  return view;
}

// Element values of a tensor converted to V (the masks are small next to q, k, v).
template <class V>
std::shared_ptr<std::vector<V>> values_as(const Tensor& t, bool truth) {
  auto out = std::make_shared<std::vector<V>>();
  for (double x : t.to_vector()) out->push_back(truth ? static_cast<V>(x != 0.0) : static_cast<V>(x));
  return out;
}

Shape with_matrix(Shape batch, std::size_t rows, std::size_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

// The batch of k's and v's gradients before broadcast axes are summed: one entry per K/V
// head, the batch's last axis (query heads) divided by the group.
Shape kv_batch(Shape batch, std::size_t group) {
  if (group > 1) batch.back() /= group;
  return batch;
}

// Where one problem's operands and results live. The input gradients go to `grad_rows`
// inside buffers shaped like the inputs (when they can be written in place), or to dense
// full-batch arrays that are then summed over broadcast axes.
struct Layout {
  Shape batch;
  std::size_t lq = 0, lk = 0, dk = 0, dv = 0;
  kernels::BatchRows q_rows, k_rows, v_rows, out_rows;
  Shape out_shape;
  std::size_t group = 1;        // query heads per K/V head (grouped-query attention)
  bool grads_in_place = false;  // q, k, v rows never repeat: write gradients where they are read
  struct Range {
    std::size_t begin = 0, width = 0;
    bool overlaps(const Range& o) const { return begin < o.begin + o.width && o.begin < begin + width; }
  };
  std::array<Range, 3> columns;  // of q, k, v in their tensors (in place only)
};

// The probabilities applied to v, [batch..., Lq, Lk], differentiable: their gradient
// flows into q and k (at the rows they were read from), never into the masks.
template <class T>
Tensor weights_of(const Tensor& q, const Tensor& k, const std::shared_ptr<kernels::AttentionProblem<T>>& problem,
                  const Layout& layout, const std::vector<kernels::RowLogSumExp<T>>& lse) {
  const hooks::ForwardScope op;  // an op of its own inside the attention's
  const kernels::AttentionProblem<T>& p = *problem;
  xt::xarray<T> weights = new_array<T>("attention_weights", with_matrix(layout.batch, p.lq, p.lk));
  kernels::attention_weights(p, lse.data(), weights.data());
  const bool needs_graph = grad_enabled() && (q.requires_grad() || k.requires_grad());
  // Backward needs the probabilities before dropout: the weights themselves without it.
  std::shared_ptr<const xt::xarray<T>> probs;
  if (needs_graph && p.dropout_p > 0) {
    kernels::AttentionProblem<T> undropped = p;
    undropped.dropout_p = 0;
    auto before = std::make_shared<xt::xarray<T>>(new_array<T>("attention_weights", weights.shape()));
    kernels::attention_weights(undropped, lse.data(), before->data());
    probs = std::move(before);
  }
  return record<T>("attention_weights", std::move(weights), {q, k},
                   [problem, probs, in_place = layout.grads_in_place,
                    overlap = layout.columns[0].overlaps(layout.columns[1])](BackwardContext<T>& ctx) {
                     kernels::AttentionProblem<T> p = *problem;
                     p.q = ctx.input(0).data();
                     p.k = ctx.input(1).data();
                     const T* before = probs ? probs->data() : ctx.output().data();
                     if (in_place) {
                       // Gradients where q and k were read; one buffer when they are disjoint
                       // columns of one tensor (entries then never write the same element).
                       const bool shared = &ctx.input_node(0) == &ctx.input_node(1) && !overlap;
                       xt::xarray<T> dq = zeros_array<T>(ctx.op(), ctx.input(0).shape());
                       xt::xarray<T> dk = shared ? xt::xarray<T>() : zeros_array<T>(ctx.op(), ctx.input(1).shape());
                       p.dq_rows = p.q_rows, p.dk_rows = p.k_rows;
                       kernels::attention_weights_backward(p, before, ctx.grad().data(), dq.data(),
                                                           shared ? dq.data() : dk.data());
                       ctx.accumulate(0, std::move(dq));
                       if (!shared) ctx.accumulate(1, std::move(dk));
                       return;
                     }
                     const Shape out_shape = to_shape(ctx.output().shape());
                     const Shape full(out_shape.begin(), out_shape.end() - 2);
                     xt::xarray<T> dq = zeros_array<T>(ctx.op(), with_matrix(full, p.lq, p.dk));
                     xt::xarray<T> dk = zeros_array<T>(ctx.op(), with_matrix(kv_batch(full, p.group), p.lk, p.dk));
                     p.dq_rows = kernels::BatchRows::dense(p.batches, p.lq, p.dk);
                     p.dk_rows = kernels::BatchRows::dense(p.batches, p.lk, p.dk, p.group);
                     kernels::attention_weights_backward(p, before, ctx.grad().data(), dq.data(), dk.data());
                     ctx.accumulate(0, unbroadcast<T>(ctx.op(), std::move(dq), to_shape(ctx.input(0).shape())));
                     ctx.accumulate(1, unbroadcast<T>(ctx.op(), std::move(dk), to_shape(ctx.input(1).shape())));
                   });
}

// What the op's backward keeps besides q, k, v and the output: the problem (its layout,
// scale, dropout), the masks it points into (converted once), each row's logsumexp, and
// where the gradients go.
template <class T>
struct SavedAttention {
  std::shared_ptr<const kernels::AttentionProblem<T>> problem;
  std::shared_ptr<const std::vector<std::uint8_t>> keep;
  std::shared_ptr<const std::vector<T>> bias;
  std::vector<kernels::RowLogSumExp<T>> lse;
  bool grads_in_place = false;
  std::array<Layout::Range, 3> columns;
};

// With the gradients in place, role r (q, k, v) writes into buffer buffer_of[r], shaped
// like its input; roles that read disjoint columns of one input share that input's buffer.
// owner[b] is the first role of buffer b.
struct GradientBuffers {
  std::array<std::size_t, 3> buffer_of{};
  std::vector<std::size_t> owner;
};

template <class T>
GradientBuffers share_gradient_buffers(BackwardContext<T>& ctx, const std::array<Layout::Range, 3>& columns) {
  GradientBuffers g;
  for (std::size_t role = 0; role < 3; ++role) {
    g.buffer_of[role] = g.owner.size();
    for (std::size_t b = 0; b < g.owner.size() && g.buffer_of[role] == g.owner.size(); ++b) {
      bool fits = &ctx.input_node(g.owner[b]) == &ctx.input_node(role);
      for (std::size_t earlier = 0; earlier < role; ++earlier)
        if (g.buffer_of[earlier] == b) fits = fits && !columns[earlier].overlaps(columns[role]);
      if (fits) g.buffer_of[role] = b;
    }
    if (g.buffer_of[role] == g.owner.size()) g.owner.push_back(role);
  }
  return g;
}

// The gradients of q, k and v, from the output's: blocks of the scores recomputed from
// q, k and each row's logsumexp (kernels/attention.cpp), never the whole probability
// matrix.
template <class T>
void attention_backward(BackwardContext<T>& ctx, const SavedAttention<T>& saved) {
  kernels::AttentionProblem<T> p = *saved.problem;
  p.q = ctx.input(0).data();
  p.k = ctx.input(1).data();
  p.v = ctx.input(2).data();
  if (saved.grads_in_place) {
    // Each gradient lands at the rows its input was read from.
    const GradientBuffers shared = share_gradient_buffers(ctx, saved.columns);
    std::vector<xt::xarray<T>> buffers;
    for (std::size_t b = 0; b < shared.owner.size(); ++b) {
      // The kernel writes every row it reads; columns no role reads must be zeros.
      std::size_t written = 0;
      for (std::size_t role = 0; role < 3; ++role)
        written += shared.buffer_of[role] == b ? saved.columns[role].width : 0;
      const auto& shape = ctx.input(shared.owner[b]).shape();
      buffers.push_back(written == shape.back() ? new_array<T>(ctx.op(), shape) : zeros_array<T>(ctx.op(), shape));
    }
    p.dq_rows = p.q_rows, p.dk_rows = p.k_rows, p.dv_rows = p.v_rows;
    kernels::attention_backward(p, ctx.output().data(), saved.lse.data(), ctx.grad().data(),
                                buffers[shared.buffer_of[0]].data(), buffers[shared.buffer_of[1]].data(),
                                buffers[shared.buffer_of[2]].data());
    for (std::size_t b = 0; b < buffers.size(); ++b) ctx.accumulate(shared.owner[b], std::move(buffers[b]));
    return;
  }
  // Gradients at the full batch shape (k's and v's with one entry per K/V head: the
  // kernel sums each head's queries), then summed over any broadcast axis.
  const Shape out_shape = to_shape(ctx.output().shape());
  const Shape full(out_shape.begin(), out_shape.end() - 2), kv_full = kv_batch(full, p.group);
  xt::xarray<T> dq = new_array<T>(ctx.op(), with_matrix(full, p.lq, p.dk));
  xt::xarray<T> dk = new_array<T>(ctx.op(), with_matrix(kv_full, p.lk, p.dk));
  xt::xarray<T> dv = new_array<T>(ctx.op(), with_matrix(kv_full, p.lk, p.dv));
  p.dq_rows = kernels::BatchRows::dense(p.batches, p.lq, p.dk);
  p.dk_rows = kernels::BatchRows::dense(p.batches, p.lk, p.dk, p.group);
  p.dv_rows = kernels::BatchRows::dense(p.batches, p.lk, p.dv, p.group);
  kernels::attention_backward(p, ctx.output().data(), saved.lse.data(), ctx.grad().data(), dq.data(), dk.data(),
                              dv.data());
  ctx.accumulate(0, unbroadcast<T>(ctx.op(), std::move(dq), to_shape(ctx.input(0).shape())));
  ctx.accumulate(1, unbroadcast<T>(ctx.op(), std::move(dk), to_shape(ctx.input(1).shape())));
  ctx.accumulate(2, unbroadcast<T>(ctx.op(), std::move(dv), to_shape(ctx.input(2).shape())));
}

// Masks, dropout and need_weights checked and converted; the kernel run; the backward
// recorded. q, k, v are given as tensors (possibly the same one, at different columns).
AttentionOutput attend(const Tensor& q, const Tensor& k, const Tensor& v, const Layout& layout,
                       const AttentionOptions& options, const std::string& operands, const char* op) {
  check_same_dtype(op, q, k);
  check_same_dtype(op, q, v);
  XGRAD_CHECK(options.dropout_p >= 0.0 && options.dropout_p < 1.0, op, "dropout_p = ", options.dropout_p,
              " is outside [0, 1)");
  XGRAD_CHECK(options.window == 0 || options.is_causal, op, "window = ", options.window,
              " is a causal sliding window: it needs is_causal");
  XGRAD_CHECK(!options.scale || std::isfinite(*options.scale), op, "scale = ", options.scale.value_or(0.0),
              " is not a finite number");
  // A learned bias (a relative position bias, ALiBi's slopes) would silently never train.
  XGRAD_CHECK(!options.additive_mask.defined() || !options.additive_mask.requires_grad() || !grad_enabled(), op,
              "additive_mask ", shape_str(options.additive_mask.shape()),
              " requires grad, but it is a constant here (no gradient flows into it): detach() it, or add a learned "
              "bias to the scores with ops of its own");
  const std::size_t lq = layout.lq, lk = layout.lk;
  const bool has_mask = options.mask.defined(), has_bias = options.additive_mask.defined();
  const MaskLayout keep_layout = has_mask ? mask_layout(op, "mask", options.mask, lq, lk) : MaskLayout{};
  const MaskLayout bias_layout =
      has_bias ? mask_layout(op, "additive_mask", options.additive_mask, lq, lk) : MaskLayout{};
  const Shape batch = layout.batch;
  const auto broadcasts_to_batch = [&](const Shape& mask_batch) {
    try {
      return broadcast_shapes(op, batch, mask_batch) == batch;
    } catch (const Error&) {
      return false;
    }
  };
  if (!broadcasts_to_batch(keep_layout.batch) || !broadcasts_to_batch(bias_layout.batch)) {
    fail(op, "masks do not broadcast to the batch ", batch, ": ", operands,
         (has_mask ? ", mask " + shape_str(options.mask.shape()) : ""),
         (has_bias ? ", additive_mask " + shape_str(options.additive_mask.shape()) : ""));
  }
  const std::uint64_t dropout_seed =
      options.dropout_p > 0.0 ? (options.generator ? *options.generator : default_generator()).next_u64() : 0;

  return dispatch_op(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // Everything backward needs besides q, k, v and the output: the problem's layout,
    // the masks (converted once) and each row's logsumexp.
    auto problem = std::make_shared<kernels::AttentionProblem<T>>();
    auto keep = has_mask ? values_as<std::uint8_t>(options.mask, true) : nullptr;
    auto bias = has_bias ? values_as<T>(options.additive_mask, false) : nullptr;
    kernels::AttentionProblem<T>& p = *problem;
    p.batches = numel(batch);
    p.lq = lq, p.lk = lk, p.dk = layout.dk, p.dv = layout.dv;
    p.q_rows = layout.q_rows, p.k_rows = layout.k_rows, p.v_rows = layout.v_rows, p.out_rows = layout.out_rows;
    p.group = layout.group;
    if (keep) p.keep = mask_view(keep->data(), keep_layout, batch);
    if (bias) p.bias = mask_view(bias->data(), bias_layout, batch);
    p.causal = options.is_causal;
    p.window = options.window;
    p.scale = static_cast<T>(options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(p.dk)));
    p.dropout_p = options.dropout_p;
    p.dropout_seed = dropout_seed;
    p.bf16 = std::is_same_v<T, float> && autocast_precision() == Precision::bfloat16;  // backward keeps it
    p.q = q.node()->values<T>().data();
    p.k = k.node()->values<T>().data();
    p.v = v.node()->values<T>().data();

    xt::xarray<T> out = new_array<T>(kOp, layout.out_shape);
    std::vector<kernels::RowLogSumExp<T>> lse(p.batches * lq);
    kernels::attention_forward(p, out.data(), lse.data());

    AttentionOutput result;
    if (options.need_weights) result.weights = weights_of(q, k, problem, layout, lse);
    SavedAttention<T> saved{problem, keep, bias, std::move(lse), layout.grads_in_place, layout.columns};
    result.output = record<T>(kOp, std::move(out), {q, k, v},
                              [saved = std::move(saved)](BackwardContext<T>& ctx) { attention_backward(ctx, saved); });
    return result;
  });
}

}  // namespace

AttentionOutput scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                             const AttentionOptions& options) {
  for (const Tensor* t : {&q, &k, &v}) check_defined(kOp, *t);
  const Shape qs = q.shape(), ks = k.shape(), vs = v.shape();
  const auto describe = [&] { return "q " + shape_str(qs) + ", k " + shape_str(ks) + ", v " + shape_str(vs); };
  XGRAD_CHECK(qs.size() >= 2 && ks.size() >= 2 && vs.size() >= 2, kOp,
              "q, k and v need at least 2 axes [..., L, d]; got ", describe());
  Layout l;
  l.lq = qs[qs.size() - 2], l.dk = qs.back(), l.lk = ks[ks.size() - 2], l.dv = vs.back();
  XGRAD_CHECK(ks.back() == l.dk, kOp, "q and k widths differ: ", describe());
  XGRAD_CHECK(vs[vs.size() - 2] == l.lk, kOp, "k and v lengths differ: ", describe());
  XGRAD_CHECK(l.dk != 0, kOp, "the query/key width is 0: ", describe());
  const auto batch_of = [](const Shape& s) { return Shape(s.begin(), s.end() - 2); };
  // Grouped-query attention: k and v count Hkv heads on axis -3 where q counts Hq. They
  // broadcast as if they had Hq heads, head h standing for their head h / group.
  Shape k_batch = batch_of(ks), v_batch = batch_of(vs);
  if (options.enable_gqa) {
    XGRAD_CHECK(qs.size() >= 3 && ks.size() >= 3 && vs.size() >= 3, kOp,
                "enable_gqa needs a head axis, q, k and v [..., H, L, d]; got ", describe());
    const std::size_t hq = qs[qs.size() - 3], hkv = ks[ks.size() - 3];
    XGRAD_CHECK(vs[vs.size() - 3] == hkv, kOp, "k and v head counts differ: ", describe());
    XGRAD_CHECK(hkv != 0 && hq % hkv == 0, kOp, "k and v heads (", hkv, ") must divide q's heads (", hq,
                "): ", describe());
    if (hq > hkv) {
      l.group = hq / hkv;
      k_batch.back() = v_batch.back() = hq;
    }
  }
  // The batch: q's, k's, v's and the masks' leading axes broadcast together.
  const auto mask_batch = [&](const Tensor& m, const char* what) {
    return m.defined() ? mask_layout(kOp, what, m, l.lq, l.lk).batch : Shape{};
  };
  try {
    l.batch = broadcast_shapes(kOp, broadcast_shapes(kOp, batch_of(qs), k_batch), v_batch);
    l.batch = broadcast_shapes(kOp, l.batch, mask_batch(options.mask, "mask"));
    l.batch = broadcast_shapes(kOp, l.batch, mask_batch(options.additive_mask, "additive_mask"));
  } catch (const Error& e) {
    if (std::string(e.what()).find("does not broadcast to the scores") != std::string::npos) throw;
    fail(kOp, "leading axes do not broadcast together: ", describe(),
         (options.mask.defined() ? ", mask " + shape_str(options.mask.shape()) : ""),
         (options.additive_mask.defined() ? ", additive_mask " + shape_str(options.additive_mask.shape()) : ""));
  }
  // Rows of each batch entry; k's and v's heads each serve `group` consecutive entries.
  const auto rows = [&](const Shape& s, std::size_t length, std::size_t width, std::size_t group) {
    Shape source = batch_of(s), batch = l.batch;
    if (group > 1) {  // the batch's heads split as [Hkv, group], along which k and v do not vary
      batch.back() /= group;
      batch.push_back(group);
      source.push_back(1);
    }
    kernels::BatchRows r;
    r.offset = batch_offsets(source, batch, length * width);
    r.stride = width;
    return r;
  };
  l.q_rows = rows(qs, l.lq, l.dk, 1), l.k_rows = rows(ks, l.lk, l.dk, l.group);
  l.v_rows = rows(vs, l.lk, l.dv, l.group);
  l.out_rows = kernels::BatchRows::dense(numel(l.batch), l.lq, l.dv);
  l.out_shape = with_matrix(l.batch, l.lq, l.dv);
  return attend(q, k, v, l, options, describe(), kOp);
}

AttentionOutput multi_head_attention(const Columns& q, const Columns& k, const Columns& v, std::size_t heads,
                                     bool batch_first, const AttentionOptions& options) {
  return multi_head_attention(q, k, v, heads, heads, batch_first, options);
}

AttentionOutput multi_head_attention(const Columns& q, const Columns& k, const Columns& v, std::size_t heads,
                                     std::size_t kv_heads, bool batch_first, const AttentionOptions& options) {
  const std::array<const Columns*, 3> operands = {&q, &k, &v};
  for (const Columns* c : operands) check_defined(kMultiHeadOp, c->tensor);
  const auto describe = [&] {
    std::string s;
    const char* names[] = {"q", "k", "v"};
    for (std::size_t i = 0; i < 3; ++i)
      s += str(i ? ", " : "", names[i], " ", operands[i]->tensor.shape(), " columns [", operands[i]->begin, ", +",
               operands[i]->width, ")");
    return s + str(", heads ", heads) + (kv_heads != heads ? str(", kv_heads ", kv_heads) : "");
  };
  XGRAD_CHECK(heads != 0, kMultiHeadOp, "heads must be positive: ", describe());
  XGRAD_CHECK(kv_heads != 0 && heads % kv_heads == 0, kMultiHeadOp,
              "kv_heads must be positive and divide heads: ", describe());
  // q splits into `heads` equal parts, k and v into `kv_heads`.
  std::array<std::size_t, 3> widths{};
  for (std::size_t i = 0; i < 3; ++i) {
    const Shape& s = operands[i]->tensor.shape();
    XGRAD_CHECK(s.size() == 3, kMultiHeadOp, "q, k and v must be ", (batch_first ? "[N, L, C]" : "[L, N, C]"), ": ",
                describe());
    widths[i] = operands[i]->width ? operands[i]->width : s[2] - std::min(s[2], operands[i]->begin);
    XGRAD_CHECK(operands[i]->begin <= s[2] && widths[i] <= s[2] - operands[i]->begin && widths[i] != 0 &&
                    widths[i] % (i == 0 ? heads : kv_heads) == 0,
                kMultiHeadOp, "column ranges must lie inside the tensors and split into equal heads: ", describe());
  }
  const Shape &qs = q.tensor.shape(), &ks = k.tensor.shape(), &vs = v.tensor.shape();
  const std::size_t n = batch_first ? qs[0] : qs[1];
  const auto length = [&](const Shape& s) { return batch_first ? s[1] : s[0]; };
  const auto batch_size = [&](const Shape& s) { return batch_first ? s[0] : s[1]; };
  XGRAD_CHECK(batch_size(ks) == n && batch_size(vs) == n && length(ks) == length(vs), kMultiHeadOp,
              "batch or key length disagree: ", describe());
  Layout l;
  l.batch = {n, heads};
  l.lq = length(qs), l.lk = length(ks), l.dk = widths[0] / heads, l.dv = widths[2] / kv_heads;
  l.group = heads / kv_heads;
  XGRAD_CHECK(widths[1] / kv_heads == l.dk, kMultiHeadOp,
              "q and k widths differ per head (k must be kv_heads x q's width / heads): ", describe());
  // Head h of batch entry n: rows of the [N, L, C] (or [L, N, C]) tensor, its columns;
  // with group > 1, k's and v's head h / group.
  const auto rows = [&](std::size_t columns, std::size_t length, std::size_t begin, std::size_t head_width,
                        std::size_t group) {
    kernels::BatchRows r;
    r.stride = batch_first ? columns : n * columns;
    for (std::size_t b = 0; b < n; ++b)
      for (std::size_t h = 0; h < heads; ++h)
        r.offset.push_back((batch_first ? b * length * columns : b * columns) + begin + h / group * head_width);
    return r;
  };
  l.q_rows = rows(qs[2], l.lq, q.begin, l.dk, 1);
  l.k_rows = rows(ks[2], l.lk, k.begin, l.dk, l.group);
  l.v_rows = rows(vs[2], l.lk, v.begin, l.dv, l.group);
  l.out_rows = rows(heads * l.dv, l.lq, 0, l.dv, 1);
  l.out_shape = batch_first ? Shape{n, l.lq, heads * l.dv} : Shape{l.lq, n, heads * l.dv};
  l.grads_in_place = true;
  for (std::size_t i = 0; i < 3; ++i) l.columns[i] = {operands[i]->begin, widths[i]};
  return attend(q.tensor, k.tensor, v.tensor, l, options, describe(), kMultiHeadOp);
}

}  // namespace xgrad
