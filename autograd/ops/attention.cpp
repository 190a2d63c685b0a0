// The fused scaled dot-product attention op: shape checks and mask broadcasting here,
// the blocked online-softmax loops in kernels/attention.cpp.

#include <cmath>

#include "autograd/kernels/attention.hpp"
#include "autograd/ops.hpp"
#include "autograd/ops/shape_util.hpp"
#include "autograd/random.hpp"

namespace xgrad {

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

// A mask padded to at least two axes: its batch axes and the [rows, cols] it spreads
// over each [Lq, Lk] score matrix (each either 1 or the full size).
struct MaskLayout {
  Shape batch;
  std::size_t rows = 1, cols = 1;
};

MaskLayout mask_layout(const char* what, const Tensor& mask, std::size_t lq, std::size_t lk) {
  Shape shape = mask.shape();
  while (shape.size() < 2) shape.insert(shape.begin(), 1);
  MaskLayout m{Shape(shape.begin(), shape.end() - 2), shape[shape.size() - 2], shape.back()};
  if ((m.rows != 1 && m.rows != lq) || (m.cols != 1 && m.cols != lk))
    fail(kOp, std::string(what) + " of shape " + shape_str(mask.shape()) + " does not broadcast to the scores [..., " +
                  std::to_string(lq) + ", " + std::to_string(lk) + "]");
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

}  // namespace

AttentionResult scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                             const AttentionOptions& options) {
  check_same_dtype(kOp, q, k);
  check_same_dtype(kOp, q, v);
  const Shape qs = q.shape(), ks = k.shape(), vs = v.shape();
  const auto describe = [&] { return "q " + shape_str(qs) + ", k " + shape_str(ks) + ", v " + shape_str(vs); };
  if (qs.size() < 2 || ks.size() < 2 || vs.size() < 2)
    fail(kOp, "q, k and v need at least 2 axes [..., L, d]; got " + describe());
  const std::size_t lq = qs[qs.size() - 2], dk = qs.back(), lk = ks[ks.size() - 2], dv = vs.back();
  if (ks.back() != dk) fail(kOp, "q and k widths differ: " + describe());
  if (vs[vs.size() - 2] != lk) fail(kOp, "k and v lengths differ: " + describe());
  if (dk == 0) fail(kOp, "the query/key width is 0: " + describe());
  if (!(options.dropout_p >= 0.0 && options.dropout_p < 1.0))
    fail(kOp, "dropout_p = " + std::to_string(options.dropout_p) + " is outside [0, 1)");

  const bool has_mask = options.mask.defined(), has_bias = options.additive_mask.defined();
  const MaskLayout keep_layout = has_mask ? mask_layout("mask", options.mask, lq, lk) : MaskLayout{};
  const MaskLayout bias_layout = has_bias ? mask_layout("additive_mask", options.additive_mask, lq, lk) : MaskLayout{};
  Shape batch;
  try {
    const auto batch_of = [](const Shape& s) { return Shape(s.begin(), s.end() - 2); };
    batch = broadcast_shapes(kOp, broadcast_shapes(kOp, batch_of(qs), batch_of(ks)), batch_of(vs));
    batch = broadcast_shapes(kOp, broadcast_shapes(kOp, batch, keep_layout.batch), bias_layout.batch);
  } catch (const Error&) {
    fail(kOp, "leading axes do not broadcast together: " + describe() +
                  (has_mask ? ", mask " + shape_str(options.mask.shape()) : "") +
                  (has_bias ? ", additive_mask " + shape_str(options.additive_mask.shape()) : ""));
  }
  const std::uint64_t dropout_seed =
      options.dropout_p > 0.0 ? (options.generator ? *options.generator : default_generator()).next_u64() : 0;

  return dispatch(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // Everything backward needs besides q, k, v and the output: the problem's layout,
    // the masks (converted once) and each row's logsumexp.
    auto problem = std::make_shared<kernels::AttentionProblem<T>>();
    auto keep = has_mask ? values_as<std::uint8_t>(options.mask, true) : nullptr;
    auto bias = has_bias ? values_as<T>(options.additive_mask, false) : nullptr;
    kernels::AttentionProblem<T>& p = *problem;
    p.batches = numel(batch);
    p.lq = lq, p.lk = lk, p.dk = dk, p.dv = dv;
    p.q_offset = batch_offsets(Shape(qs.begin(), qs.end() - 2), batch, lq * dk);
    p.k_offset = batch_offsets(Shape(ks.begin(), ks.end() - 2), batch, lk * dk);
    p.v_offset = batch_offsets(Shape(vs.begin(), vs.end() - 2), batch, lk * dv);
    if (keep) p.keep = mask_view(keep->data(), keep_layout, batch);
    if (bias) p.bias = mask_view(bias->data(), bias_layout, batch);
    p.causal = options.is_causal;
    p.scale = static_cast<T>(options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(dk)));
    p.dropout_p = options.dropout_p;
    p.dropout_seed = dropout_seed;
    p.q = q.node()->values<T>().data();
    p.k = k.node()->values<T>().data();
    p.v = v.node()->values<T>().data();

    xt::xarray<T> out = xt::xarray<T>::from_shape(to_xshape<T>(with_matrix(batch, lq, dv)));
    std::vector<T> lse(p.batches * lq);
    kernels::attention_forward(p, out.data(), lse.data());

    AttentionResult result;
    if (options.need_weights) {
      xt::xarray<T> weights = xt::xarray<T>::from_shape(to_xshape<T>(with_matrix(batch, lq, lk)));
      kernels::attention_weights(p, lse.data(), weights.data());
      result.weights = make_leaf(std::move(weights));
    }
    result.output = record<T>(
        kOp, std::move(out), {q, k, v},
        [problem, keep, bias, lse = std::move(lse), batch](BackwardContext<T>& ctx) {
          kernels::AttentionProblem<T> p = *problem;
          p.q = ctx.input(0).data();
          p.k = ctx.input(1).data();
          p.v = ctx.input(2).data();
          // Gradients at the full batch shape, then summed over any broadcast axis.
          xt::xarray<T> dq = xt::xarray<T>::from_shape(to_xshape<T>(with_matrix(batch, p.lq, p.dk)));
          xt::xarray<T> dk = xt::xarray<T>::from_shape(to_xshape<T>(with_matrix(batch, p.lk, p.dk)));
          xt::xarray<T> dv = xt::xarray<T>::from_shape(to_xshape<T>(with_matrix(batch, p.lk, p.dv)));
          kernels::attention_backward(p, ctx.output().data(), lse.data(), ctx.grad().data(), dq.data(), dk.data(),
                                      dv.data());
          ctx.accumulate(0, unbroadcast<T>(std::move(dq), to_shape(ctx.input(0).shape())));
          ctx.accumulate(1, unbroadcast<T>(std::move(dk), to_shape(ctx.input(1).shape())));
          ctx.accumulate(2, unbroadcast<T>(std::move(dv), to_shape(ctx.input(2).shape())));
        });
    return result;
  });
}

}  // namespace xgrad
