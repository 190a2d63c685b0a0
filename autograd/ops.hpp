#pragma once
// The differentiable ops. Each records its own backward next to its forward (see
// autograd/ops/*.cpp). Binary elementwise ops broadcast as numpy does, and their
// gradients are summed back to each input's shape. Axes may be negative (from the end).
// Both operands of a binary op must have the same dtype: convert with Tensor::to().

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "xgrad/autograd/tensor.hpp"

namespace xgrad {

// ---- elementwise (ops/elementwise.cpp) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor add(const Tensor& x, double s);
Tensor mul(const Tensor& x, double s);
Tensor rsub(double s, const Tensor& x);  // s - x
Tensor rdiv(double s, const Tensor& x);  // s / x
Tensor pow(const Tensor& x, double exponent);
Tensor pow(const Tensor& base, const Tensor& exponent);  // needs base > 0 where exponent's grad is used
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor abs(const Tensor& x);  // gradient 0 at 0
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor erf(const Tensor& x);
// Limits x to [min, max] (either may be left out), as torch.clamp: min applies first, so
// min > max gives max; NaN stays NaN; gradient 1 where min <= x <= max, else 0.
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max = std::nullopt);
// Elementwise, broadcasting; NaN in either operand gives NaN. On a tie each operand gets
// half the gradient (as PyTorch).
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
// A differentiable change of dtype (Tensor::to); the gradient is cast back.
Tensor cast(const Tensor& x, DType dtype);

// Comparisons give 1 where true and 0 where false, in the operands' dtype; no gradient.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double s);
Tensor ne(const Tensor& a, double s);
Tensor lt(const Tensor& a, double s);
Tensor le(const Tensor& a, double s);
Tensor gt(const Tensor& a, double s);
Tensor ge(const Tensor& a, double s);

// Selection. A condition or mask is any tensor: nonzero means true. All three operands
// broadcast together; no gradient flows to the condition.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
// x with `value` wherever mask is true (as torch.masked_fill; mask broadcasts to x).
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& x, double s);
Tensor operator+(double s, const Tensor& x);
Tensor operator-(const Tensor& x, double s);
Tensor operator-(double s, const Tensor& x);
Tensor operator*(const Tensor& x, double s);
Tensor operator*(double s, const Tensor& x);
Tensor operator/(const Tensor& x, double s);
Tensor operator/(double s, const Tensor& x);

// ---- activations (ops/activation.cpp) ----
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);  // gradient 0 at 0
// Exact GELU, x * Phi(x); approximate = true uses the tanh form (as PyTorch's 'tanh').
Tensor gelu(const Tensor& x, bool approximate = false);
Tensor silu(const Tensor& x);  // x * sigmoid(x), PyTorch's SiLU (swish)
// silu(gate) * up as one op, the gated unit of Llama's feed-forward block
// (down(swiglu(gate(x), up(x)))); broadcasting as mul. Backward recomputes sigmoid(gate)
// chunk by chunk and keeps nothing but the two inputs.
Tensor swiglu(const Tensor& gate, const Tensor& up);
// log(1 + exp(beta x)) / beta, and x where beta x > threshold (as torch's softplus).
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
// Numerically stable: the row maximum is subtracted first.
Tensor softmax(const Tensor& x, int axis = -1);
Tensor log_softmax(const Tensor& x, int axis = -1);
// Inverted dropout: in training, zeroes each element with probability p and scales the
// rest by 1 / (1 - p), drawing from `gen`; identity when p == 0 or not training.
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen);

// ---- reductions (ops/reduce.cpp) ----
// An empty list of axes reduces nothing, as numpy's axis=() (PyTorch 1.13's sum(dim=())
// reduces every axis): sum(x) reduces them all.
Tensor sum(const Tensor& x);  // all elements, shape []
Tensor sum(const Tensor& x, const std::vector<int>& axes, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int>& axes, bool keepdim = false);
// Gradient flows to the first maximal element of each reduced group (as torch.max(dim)).
Tensor max(const Tensor& x);
Tensor max(const Tensor& x, const std::vector<int>& axes, bool keepdim = false);
// Variance and standard deviation, divided by n - correction (1: Bessel's, PyTorch's
// default; 0: the population's). Fewer than correction + 1 elements per group is an
// error. stddev (torch.std) has gradient 0 where it is 0 (PyTorch gives NaN there).
Tensor var(const Tensor& x, const std::vector<int>& axes, int correction = 1, bool keepdim = false);
Tensor stddev(const Tensor& x, const std::vector<int>& axes, int correction = 1, bool keepdim = false);
// Over all elements. The correction is deduced, so a braced list of axes, var(x, {1}),
// never turns into a correction: it takes the overload above.
namespace detail {
Tensor var_all(const Tensor& x, int correction);
Tensor stddev_all(const Tensor& x, int correction);
}  // namespace detail
inline Tensor var(const Tensor& x) { return detail::var_all(x, 1); }
inline Tensor stddev(const Tensor& x) { return detail::stddev_all(x, 1); }
template <std::integral Correction>
Tensor var(const Tensor& x, Correction correction) {
  return detail::var_all(x, static_cast<int>(correction));
}
template <std::integral Correction>
Tensor stddev(const Tensor& x, Correction correction) {
  return detail::stddev_all(x, static_cast<int>(correction));
}
// Running sum along `axis`, as torch.cumsum.
Tensor cumsum(const Tensor& x, int axis);
// Position of the first largest / smallest element (NaN counts as both, as PyTorch):
// over all elements (flattened, shape []) or along `axis`. Not differentiable.
Indices argmax(const Tensor& x);
Indices argmax(const Tensor& x, int axis, bool keepdim = false);
Indices argmin(const Tensor& x);
Indices argmin(const Tensor& x, int axis, bool keepdim = false);

// ---- linear algebra (ops/linalg.cpp) ----
// Matrix product over the last two axes with broadcast batch axes, as numpy.matmul:
// [..., n, k] x [..., k, m] -> [..., n, m]; a 1-D operand is a row (left) or column
// (right) vector. transpose_a / transpose_b use the transposed last two axes of that
// operand without copying it (the GEMM reads it transposed).
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

// y = x W^T + b over the last axis: x [..., in], weight [out, in] (PyTorch's layout),
// bias [out] or an undefined Tensor for none. One GEMM for all leading axes, the bias
// folded in as its accumulator.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// relu(linear(x, weight, bias)) as one op, the same values and gradients bit for bit:
// relu applied in place and its gradient taken inside linear's backward, one pass less
// over the activations each way (feed-forward blocks use it).
Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// gelu(linear(x, weight, bias), approximate) as one op, the same values and gradients bit
// for bit: GELU applied to each block of the product as it is written, and its gradient
// taken inside linear's backward (GPT-2's MLP, the transformer layers' gelu feed-forward).
Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), bool approximate = false);

// ---- normalization (ops/normalization.cpp) ----
// (x - mean) / sqrt(var + eps) * weight + bias over the trailing axes `normalized_shape`
// (x's shape must end in it), as one row per leading index: biased variance, as
// torch.nn.functional.layer_norm. weight and bias have the normalized shape; either may
// be an undefined Tensor for none.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// The same with the normalized shape read from weight (else bias; the last axis without
// either).
Tensor layer_norm(const Tensor& x, const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), double eps = 1e-5);
// x / sqrt(mean(x^2) + eps) * weight over the trailing axes `normalized_shape`, as
// torch.nn.functional.rms_norm (PyTorch 2.4+); weight has the normalized shape or is
// undefined. No eps means the machine epsilon of x's dtype (torch.finfo(dtype).eps, as
// PyTorch's eps=None). One fused kernel.
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);

// ---- attention (ops/attention.cpp) ----
struct AttentionOptions {
  // Nonzero where query i may attend to key j (the Annotated Transformer's rule: a zero
  // hides); any dtype, broadcastable to [..., Lq, Lk].
  Tensor mask;
  // Added to the scores: -inf hides, finite values bias (e.g. -1e9, or a position bias).
  // Broadcastable to [..., Lq, Lk]; treated as a constant (no gradient flows into it).
  Tensor additive_mask;
  // Query i sees keys j <= i, counting both from the first position (top-left aligned
  // when Lq != Lk, as PyTorch's is_causal).
  bool is_causal = false;
  // With is_causal, a sliding window: query i sees only keys i - window < j <= i
  // (Mistral's sliding_window); 0: every earlier key. Key blocks wholly outside it are
  // skipped, so the work grows with Lq x window rather than Lq x Lk.
  std::size_t window = 0;
  std::optional<double> scale;  // default 1 / sqrt(dk)
  // Dropout on the probabilities, with inverted scaling; the op applies it whenever it
  // is positive, so pass 0 outside training. Draws one seed from `generator` (the
  // process-wide default when null).
  double dropout_p = 0.0;
  Generator* generator = nullptr;
  // Also return the probabilities [..., Lq, Lk] (after dropout, as applied to v). Only
  // then is a map of that size materialised. A loss through them backpropagates into q
  // and k (attention supervision, entropy penalties).
  bool need_weights = false;
  // Grouped-query attention in scaled_dot_product_attention (PyTorch's enable_gqa): axis
  // -3 of q holds Hq heads and that of k and v Hkv heads, Hkv dividing Hq; query head h
  // reads k/v head h / (Hq / Hkv), in place. multi_head_attention ignores it: it takes
  // kv_heads instead.
  bool enable_gqa = false;
};

struct AttentionOutput {
  Tensor output;   // [..., Lq, dv]
  Tensor weights;  // [..., Lq, Lk] with need_weights, else undefined
};

// softmax(q k^T * scale + masks) v, fused: q [..., Lq, dk], k [..., Lk, dk],
// v [..., Lk, dv] (dv may differ from dk), leading axes broadcast. Memory grows with
// Lq + Lk, not Lq * Lk: backward recomputes the probabilities from each row's saved
// logsumexp. A query row whose keys are all masked (by `mask`, causality or an additive
// -inf) outputs zeros and passes zero gradient, never NaN. Parallel over the leading axes.
// With options.enable_gqa, k and v may have fewer heads than q (see AttentionOptions).
AttentionOutput scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                             const AttentionOptions& options = {});

// Columns [begin, begin + width) of the last axis of a [N, L, C] tensor (or [L, N, C]).
struct Columns {
  Tensor tensor;
  std::size_t begin = 0, width = 0;  // width 0: to the last column
};

// The same attention over `heads` heads read and written in place, as multi-head
// attention needs it without a split, permute or merge copy (llm.c's layout): q, k, v are
// column ranges of [N, L, C] tensors ([L, N, C] when !batch_first), head h taking the
// h-th equal part of each range; one fused QKV projection can supply all three. The
// output is [N, L, heads * dv] (or [L, N, heads * dv]) with head h in its h-th part, ready
// for the output projection; weights are [N, heads, Lq, Lk]. Masks broadcast against
// [N, heads, Lq, Lk]. Gradients flow into each tensor's columns.
AttentionOutput multi_head_attention(const Columns& q, const Columns& k, const Columns& v, std::size_t heads,
                                     bool batch_first, const AttentionOptions& options = {});
// Grouped-query attention (Llama's, as Hugging Face's repeat_kv): k and v hold kv_heads
// heads, kv_heads dividing heads, and query head h reads k/v head h / (heads / kv_heads),
// in place (never repeated into a copy); their gradients sum over each head's queries.
// kv_heads == heads is the overload above; kv_heads == 1 is multi-query attention.
AttentionOutput multi_head_attention(const Columns& q, const Columns& k, const Columns& v, std::size_t heads,
                                     std::size_t kv_heads, bool batch_first, const AttentionOptions& options = {});

// ---- rotary position embedding (ops/rope.cpp) ----
struct RopeOptions {
  double theta = 10000.0;  // the frequencies' base (Hugging Face's rope_theta): finite, > 0
  std::size_t offset = 0;  // the first row's position: the cached length when generating
  // The leading columns of each head that turn (even; 0: all of them); the others pass
  // through, as Hugging Face's partial_rotary_factor (rotary_dim = head_dim * factor).
  std::size_t rotary_dim = 0;
  // Each turning pair's angle per position, rotary_dim / 2 of them (Hugging Face's
  // inv_freq), each finite and >= 0: a scaled RoPE's (a Llama's rope_scaling,
  // models::scaled_rope_frequencies). Given, they replace rope_frequencies(theta,
  // rotary_dim), and theta is not read (still checked).
  std::vector<double> frequencies{};
};

// Plain RoPE's frequencies theta^(-2i / rotary_dim), i < rotary_dim / 2, in double.
std::vector<double> rope_frequencies(double theta, std::size_t rotary_dim);

// RoPE (Su et al. 2021, RoFormer) in the rotate-half form of Hugging Face's Llama (and
// GPT-NeoX), over the last axis of x [..., T, D] (D even). Row t is at position
// p = offset + t; with r = rotary_dim and h = r / 2, columns i and i + h (i < h) turn by
// the angle p * f_i, f_i = theta^(-2i / r) (or options.frequencies[i]):
//   out[i] = x[i] cos - x[i + h] sin,   out[i + h] = x[i + h] cos + x[i] sin.
// The angles, their cos and sin are computed in double, then rounded to x's dtype. The
// backward turns the gradient back (the transpose). Parallel over rows; the same bits on
// any thread count.
Tensor rope(const Tensor& x, const RopeOptions& options = {});
// The same for `heads` heads side by side in a column range of x [N, L, C] (batch first:
// positions along axis 1), read in place as multi_head_attention reads them: head h is the
// h-th equal part of the range. Returns [N, L, width], the heads as laid out in the range,
// so a Llama block turns q and k straight out of its fused QKV projection, no split:
//   Tensor q = rope({qkv, 0, C}, heads, o), k = rope({qkv, C, C}, heads, o);
//   multi_head_attention({q}, {k}, {qkv, 2 * C, C}, heads, true, causal);
// The gradient flows into x's columns of the range.
Tensor rope(const Columns& x, std::size_t heads, const RopeOptions& options = {});

// ---- shape (ops/shape.cpp) ----
// One entry may be -1: inferred from the element count.
Tensor reshape(const Tensor& x, const std::vector<std::int64_t>& shape);
Tensor reshape(const Tensor& x, std::initializer_list<std::int64_t> shape);  // reshape(x, {2, -1})
Tensor reshape(const Tensor& x, const Shape& shape);                         // exactly `shape`
Tensor permute(const Tensor& x, const std::vector<int>& axes);
Tensor transpose(const Tensor& x, int axis0, int axis1);
// Elements start, start + step, ... < end along `axis` (end is clamped to the size).
Tensor slice(const Tensor& x, int axis, std::size_t start, std::size_t end, std::size_t step = 1);
Tensor concat(const std::vector<Tensor>& xs, int axis);
// Pieces of the given sizes along `axis`; they must add up to that axis' size.
std::vector<Tensor> split(const Tensor& x, const std::vector<std::size_t>& sizes, int axis);
// `chunks` pieces of equal size along `axis` (which must divide evenly).
std::vector<Tensor> chunk(const Tensor& x, std::size_t chunks, int axis);
Tensor unsqueeze(const Tensor& x, int axis);
Tensor squeeze(const Tensor& x, int axis);           // the axis must have size 1
Tensor expand(const Tensor& x, const Shape& shape);  // broadcast to `shape`
// Constant padding as torch.nn.functional.pad: `pads` holds (before, after) pairs from
// the last axis backwards ({left, right, top, bottom} pads a matrix); a negative amount
// removes elements.
Tensor pad(const Tensor& x, const std::vector<std::int64_t>& pads, double value = 0.0);
// The upper / lower triangle of the matrices in the last two axes: element (i, j) is
// kept where j - i >= diagonal (triu) or j - i <= diagonal (tril), else 0.
Tensor triu(const Tensor& x, std::int64_t diagonal = 0);
Tensor tril(const Tensor& x, std::int64_t diagonal = 0);

// ---- indexing (ops/indexing.cpp) ----
// The options of torch.nn.functional.embedding.
struct EmbeddingOptions {
  // Ids equal to it pass no gradient to their row (negative: counted from the end).
  std::optional<std::int64_t> padding_idx = std::nullopt;
  // Before the lookup, each row looked up whose norm_type-norm exceeds max_norm is scaled
  // in place by max_norm / (norm + 1e-7), as torch.embedding_renorm_: it changes weight
  // itself, outside the graph (no gradient through the renorm), so look up before any
  // other use of weight in the same graph. norm_type > 0 or inf.
  std::optional<double> max_norm = std::nullopt;
  double norm_type = 2.0;
  // Each row's gradient divided by how many times its id appears in ids.
  bool scale_grad_by_freq = false;
};
// Rows of weight [num, d] picked by ids of any shape: result ids.shape + [d].
Tensor embedding(const Tensor& weight, const Indices& ids, const EmbeddingOptions& options = {});
// out[i][j][k] = x[index[i][j][k]][j][k] for axis 0 (and so on), as torch.gather: index
// has x's number of axes, no larger than x except along `axis`; the result has its shape.
Tensor gather(const Tensor& x, int axis, const Indices& index);
// The entries `index` (1-D) along `axis`, in that order, repeats allowed (torch.index_select).
Tensor index_select(const Tensor& x, int axis, const Indices& index);
// Indices from a tensor of whole numbers (e.g. class ids stored as floats), and back.
Indices to_indices(const Tensor& t);
Tensor to_tensor(const Indices& ids, DType dtype = DType::float32);

// ---- losses (ops/loss.cpp) ----
enum class Reduction { none, mean, sum };

// PyTorch's cross_entropy options.
struct CrossEntropyOptions {
  // none: one loss per row, shaped as the targets; sum; mean: over the counted targets,
  // weighted by their class weights when `weight` is given.
  Reduction reduction = Reduction::mean;
  Tensor weight = {};                // [C]: each class's weight (a constant), or none
  std::int64_t ignore_index = -100;  // class targets equal to it count nowhere
  double label_smoothing = 0.0;      // in [0, 1]: the target mixed with a uniform one
  // The axis of the classes: the last by default ([..., C]); 1 for PyTorch's layout
  // [N, C, d1, ...] (its targets [N, d1, ...]).
  int class_axis = -1;
};

// Cross-entropy of logits against class targets (the logits' shape without the class
// axis). Targets equal to ignore_index count neither in the sum nor in the mean; if
// every target is ignored (or the counted weights sum to 0) the mean is 0 with zero
// gradient.
Tensor cross_entropy(const Tensor& logits, const Indices& targets, const CrossEntropyOptions& options = {});
// With only ignore_index set. Deduced, so that cross_entropy(logits, targets, {}) means
// the default options, not ignore_index 0.
template <std::integral Index>
Tensor cross_entropy(const Tensor& logits, const Indices& targets, Index ignore_index) {
  CrossEntropyOptions options;
  options.ignore_index = static_cast<std::int64_t>(ignore_index);
  return cross_entropy(logits, targets, options);
}
// Against class probabilities ("soft" targets) of the logits' shape, which also receive a
// gradient; mean divides by the number of rows; ignore_index does not apply.
Tensor cross_entropy(const Tensor& logits, const Tensor& probabilities, const CrossEntropyOptions& options = {});

}  // namespace xgrad
