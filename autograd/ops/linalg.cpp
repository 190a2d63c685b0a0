// Batched matrix product through CBLAS. Transposes (requested, or needed by backward)
// become GEMM flags, never copies; broadcast batch gradients are summed by GEMMs with
// beta = 1 into the same slot. Inside an AutocastGuard(bfloat16) float32 products take
// bf16 operands (autograd/precision.hpp).

#include <algorithm>
#include <memory>
#include <type_traits>

#include "xgrad/autograd/kernels/gelu.hpp"
#include "xgrad/autograd/kernels/gemm.hpp"
#include "xgrad/autograd/kernels/linear.hpp"
#include "xgrad/autograd/ops.hpp"
#include "xgrad/autograd/ops/shape_util.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/autograd/precision.hpp"

namespace xgrad {

namespace {

// A float32 operand rounded to bfloat16 once, shared by the forward and backward products
// that use it (autocast: autograd/precision.hpp).
using Bf16Copy = std::shared_ptr<const kernels::bfloat16[]>;

Bf16Copy rounded(const float* x, std::size_t rows, std::size_t cols) {
  std::shared_ptr<kernels::bfloat16[]> out(new kernels::bfloat16[rows * cols]);  // not zeroed: written next
  kernels::round_to_bfloat16(x, rows, cols, cols, out.get());
  return out;
}

// A product's A operand (x: rows x cols) rounded to bf16, or the rounding kept with x
// while its values are unchanged since: a leaf's (the weight's, below), or one the op that
// made x wrote as it wrote x (linear_relu's output, for the linear that reads it next).
Bf16Copy rounded_operand(const Tensor& x, std::size_t rows, std::size_t cols) {
  Node& node = *x.node();
  const float* values = node.values<float>().data();
  const std::shared_ptr<const kernels::Bf16Weight> kept = node.bf16_weight.load();
  if (kept && kept->made_from(values, rows, cols, node.version->load(std::memory_order_relaxed)))
    return Bf16Copy(kept, kept->data());
  return rounded(values, rows, cols);
}

// A weight (linear's W, matmul's 2-D B) rounded to bf16 for its products. A leaf's (a
// parameter's) is kept with it and reused until its values change, with the blocked copies
// oneDNN reads (kernels/onednn_matmul.hpp); another's is made for this call.
std::shared_ptr<const kernels::Bf16Weight> bf16_weight(const Tensor& weight, std::size_t rows, std::size_t cols) {
  Node& node = *weight.node();
  const float* values = node.values<float>().data();
  const std::uint64_t version = node.version->load(std::memory_order_relaxed);
  if (!node.is_leaf()) return std::make_shared<const kernels::Bf16Weight>(values, rows, cols, version);
  std::shared_ptr<const kernels::Bf16Weight> kept = node.bf16_weight.load();
  if (!kept || !kept->made_from(values, rows, cols, version)) {
    kept = std::make_shared<const kernels::Bf16Weight>(values, rows, cols, version);
    node.bf16_weight.store(kept);
  }
  return kept;
}

// How a weight's products read it (kernels/gemm.hpp): blocked where its values stay as they
// are for many products, a leaf either frozen (LoRA's base) or read without a graph
// (generation, evaluation); plain where this graph trains it, to change after one forward
// and one backward product a step. A fixed rule, not a count of reads, so that a product's
// bits never depend on how often the weight was read before (kernels/onednn_matmul.hpp).
kernels::WeightRead weight_read(const Tensor& weight) {
  const bool stays = weight.node()->is_leaf() && !(weight.requires_grad() && grad_enabled());
  return stays ? kernels::WeightRead::blocked : kernels::WeightRead::plain;
}

// How a bf16 product writes the gradient of `t`: streamed past the caches for a leaf's (a
// parameter's: read next by the gradient norm and the optimizer, after the whole backward),
// through them for anything else's (read by the op that made it, next).
kernels::CStore gradient_store(const Tensor& t) {
  return t.node()->is_leaf() ? kernels::CStore::streamed : kernels::CStore::cached;
}

// Products of float32 tensors in bf16: inside an AutocastGuard(bfloat16).
template <class T>
bool products_in_bf16() {
  return std::is_same_v<T, float> && autocast_precision() == Precision::bfloat16;
}

// Everything one matmul call needs: sizes of op(A) [m, k], op(B) [k, n] (GEMM's names),
// and for each batch the offsets of its A, B and C matrices.
struct MatmulPlan {
  bool trans_a = false, trans_b = false;
  std::size_t m = 0, n = 0, k = 0;
  std::size_t lda = 0, ldb = 0;                 // row strides of A and B as stored
  std::vector<std::size_t> a_offset, b_offset;  // per output batch
  Shape out_shape;
};

MatmulPlan plan_matmul(const Shape& a, const Shape& b, bool trans_a, bool trans_b) {
  const auto describe = [&] {
    return shape_str(a) + (trans_a ? " (transposed)" : "") + " and " + shape_str(b) + (trans_b ? " (transposed)" : "");
  };
  XGRAD_CHECK(a.size() >= 2 && b.size() >= 2, "matmul", "needs at least 2-D operands, got ", describe());
  MatmulPlan p;
  p.trans_a = trans_a;
  p.trans_b = trans_b;
  const std::size_t a_rows = a[a.size() - 2], a_cols = a.back();
  const std::size_t b_rows = b[b.size() - 2], b_cols = b.back();
  p.m = trans_a ? a_cols : a_rows;
  p.k = trans_a ? a_rows : a_cols;
  const std::size_t k_b = trans_b ? b_cols : b_rows;
  p.n = trans_b ? b_rows : b_cols;
  XGRAD_CHECK(p.k == k_b, "matmul", "shapes ", describe(), " do not match: inner dimensions ", p.k, " and ", k_b);
  p.lda = std::max<std::size_t>(a_cols, 1);  // CBLAS rejects a leading dimension of 0
  p.ldb = std::max<std::size_t>(b_cols, 1);
  const Shape a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  Shape out_batch;
  try {
    out_batch = broadcast_shapes("matmul", a_batch, b_batch);
  } catch (const Error&) {
    fail("matmul", "batch dimensions of ", describe(), " cannot be broadcast together");
  }
  if (numel(b_batch) == 1 && a_batch == out_batch && !trans_a) {
    // B is one matrix and A is a contiguous stack: fold A's batches into its rows.
    p.m *= numel(a_batch);
    p.a_offset = {0};
    p.b_offset = {0};
  } else {
    p.a_offset = batch_offsets(a_batch, out_batch, a_rows * a_cols);
    p.b_offset = batch_offsets(b_batch, out_batch, b_rows * b_cols);
  }
  p.out_shape = out_batch;
  p.out_shape.push_back(trans_a ? a_cols : a_rows);
  p.out_shape.push_back(p.n);
  return p;
}

bool is_empty(const MatmulPlan& p) { return p.m == 0 || p.n == 0 || p.k == 0; }

// Input i's gradient as `products` products make it. One product writes every element, so
// a first gradient is written (beta 0), not zero-filled and then added to: for GPT-2's tied
// embedding that fill and re-read were 300 MB a step. Several (the slices of a batch, a
// broadcast operand's sum) add into a zero-filled buffer.
template <class T>
typename BackwardContext<T>::GradTarget product_grad_target(BackwardContext<T>& ctx, std::size_t i,
                                                            std::size_t products) {
  if (products == 1) return ctx.grad_target(i);
  return {ctx.grad_buffer(i).data(), false};
}

template <class T>
void matmul_backward(const MatmulPlan& p, BackwardContext<T>& ctx) {
  if (is_empty(p)) {  // nothing flows through an empty product: zero gradients, as PyTorch's
    for (std::size_t i = 0; i < 2; ++i)
      if (ctx.needs_grad(i)) ctx.grad_buffer(i);
    return;
  }
  const T* g = ctx.grad().data();
  const T* a = ctx.input(0).data();
  const T* b = ctx.input(1).data();
  const std::size_t c_size = p.m * p.n;
  if (ctx.needs_grad(0)) {
    const auto da = product_grad_target(ctx, 0, p.a_offset.size());
    for (std::size_t i = 0; i < p.a_offset.size(); ++i) {
      if (!p.trans_a)  // dA = dC op(B)^T
        kernels::gemm<T>(false, !p.trans_b, p.m, p.k, p.n, T(1), g + i * c_size, p.n, b + p.b_offset[i], p.ldb,
                         da.beta(), da.data + p.a_offset[i], p.lda);
      else  // A stored [k, n]: dA = op(B) dC^T
        kernels::gemm<T>(p.trans_b, true, p.k, p.m, p.n, T(1), b + p.b_offset[i], p.ldb, g + i * c_size, p.n, da.beta(),
                         da.data + p.a_offset[i], p.lda);
    }
  }
  if (ctx.needs_grad(1)) {
    const auto db = product_grad_target(ctx, 1, p.b_offset.size());
    for (std::size_t i = 0; i < p.b_offset.size(); ++i) {
      if (!p.trans_b)  // dB = op(A)^T dC
        kernels::gemm<T>(!p.trans_a, false, p.k, p.n, p.m, T(1), a + p.a_offset[i], p.lda, g + i * c_size, p.n,
                         db.beta(), db.data + p.b_offset[i], p.ldb);
      else  // B stored [m, k]: dB = dC^T op(A)
        kernels::gemm<T>(true, p.trans_a, p.n, p.k, p.m, T(1), g + i * c_size, p.n, a + p.a_offset[i], p.lda, db.beta(),
                         db.data + p.b_offset[i], p.ldb);
    }
  }
}

// The same backward with the products in bf16: A and B as rounded in forward (B as the
// weight it is when 2-D, or null), dC rounded.
void matmul_backward_bf16(const MatmulPlan& p, const Bf16Copy& a, const Bf16Copy& b,
                          const std::shared_ptr<const kernels::Bf16Weight>& b_weight, kernels::WeightRead b_read,
                          kernels::CStore b_store, BackwardContext<float>& ctx) {
  if (is_empty(p)) {
    for (std::size_t i = 0; i < 2; ++i)
      if (ctx.needs_grad(i)) ctx.grad_buffer(i);
    return;
  }
  const std::size_t c_size = p.m * p.n;
  const Bf16Copy g = rounded(ctx.grad().data(), ctx.grad().size() / p.n, p.n);
  const kernels::bfloat16 *gv = g.get(), *av = a.get(), *bv = b.get();
  if (ctx.needs_grad(0)) {
    const auto da = product_grad_target(ctx, 0, p.a_offset.size());
    for (std::size_t i = 0; i < p.a_offset.size(); ++i) {
      if (!p.trans_a && b_weight)
        kernels::gemm(false, !p.trans_b, p.m, p.k, p.n, 1.0f, gv + i * c_size, p.n, *b_weight, b_read, da.beta(),
                      da.data + p.a_offset[i], p.lda);
      else if (!p.trans_a)
        kernels::gemm(false, !p.trans_b, p.m, p.k, p.n, 1.0f, gv + i * c_size, p.n, bv + p.b_offset[i], p.ldb,
                      da.beta(), da.data + p.a_offset[i], p.lda);
      else
        kernels::gemm(p.trans_b, true, p.k, p.m, p.n, 1.0f, bv + p.b_offset[i], p.ldb, gv + i * c_size, p.n, da.beta(),
                      da.data + p.a_offset[i], p.lda);
    }
  }
  if (ctx.needs_grad(1)) {
    const auto db = product_grad_target(ctx, 1, p.b_offset.size());
    for (std::size_t i = 0; i < p.b_offset.size(); ++i) {
      if (!p.trans_b)
        kernels::gemm(!p.trans_a, false, p.k, p.n, p.m, 1.0f, av + p.a_offset[i], p.lda, gv + i * c_size, p.n,
                      db.beta(), db.data + p.b_offset[i], p.ldb, nullptr, b_store);
      else
        kernels::gemm(true, p.trans_a, p.n, p.k, p.m, 1.0f, gv + i * c_size, p.n, av + p.a_offset[i], p.lda, db.beta(),
                      db.data + p.b_offset[i], p.ldb, nullptr, b_store);
    }
  }
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  check_same_dtype("matmul", a, b);
  XGRAD_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul", "needs operands of at least 1 axis, got shapes ", a.shape(),
              " and ", b.shape());
  // Vectors as numpy treats them: a row on the left, a column on the right.
  if (a.dim() == 1 || b.dim() == 1) {
    XGRAD_CHECK((a.dim() != 1 || !transpose_a) && (b.dim() != 1 || !transpose_b), "matmul",
                "a 1-D operand cannot be transposed: shapes ", a.shape(), " and ", b.shape());
    const Shape &as = a.shape(), &bs = b.shape();
    const std::size_t k_a = a.dim() == 1 ? as[0] : transpose_a ? as[as.size() - 2] : as.back();
    const std::size_t k_b = b.dim() == 1 ? bs[0] : transpose_b ? bs.back() : bs[bs.size() - 2];
    XGRAD_CHECK(k_a == k_b, "matmul", "shapes ", as, (transpose_a ? " (transposed)" : ""), " and ", bs,
                (transpose_b ? " (transposed)" : ""), " do not match: inner dimensions ", k_a, " and ", k_b);
    const Tensor a2 = a.dim() == 1 ? unsqueeze(a, 0) : a;
    const Tensor b2 = b.dim() == 1 ? unsqueeze(b, -1) : b;
    Tensor out = matmul(a2, b2, transpose_a, transpose_b);
    if (b.dim() == 1) out = squeeze(out, -1);
    if (a.dim() == 1) out = squeeze(out, -2 + (b.dim() == 1 ? 1 : 0));
    return out;
  }
  const MatmulPlan plan = plan_matmul(a.shape(), b.shape(), transpose_a, transpose_b);
  return dispatch_op(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* av = a.node()->values<T>().data();
    const T* bv = b.node()->values<T>().data();
    // An empty product is a sum over k = 0 terms, zeros: GEMM would not run.
    xt::xarray<T> out =
        is_empty(plan) ? zeros_array<T>("matmul", plan.out_shape) : new_array<T>("matmul", plan.out_shape);
    const std::size_t c_size = plan.m * plan.n;
    if constexpr (std::is_same_v<T, float>) {
      if (products_in_bf16<T>()) {
        const Bf16Copy ab = rounded(av, numel(a.shape()) / plan.lda, plan.lda);
        // A 2-D B is one matrix every batch reads: a weight (a tied embedding's logits).
        const auto b_weight = b.dim() == 2 ? bf16_weight(b, b.shape()[0], b.shape()[1]) : nullptr;
        const kernels::WeightRead b_read = weight_read(b);
        const Bf16Copy bb =
            b_weight ? Bf16Copy(b_weight, b_weight->data()) : rounded(bv, numel(b.shape()) / plan.ldb, plan.ldb);
        for (std::size_t i = 0; i < plan.a_offset.size() && !is_empty(plan); ++i) {
          if (b_weight)
            kernels::gemm(plan.trans_a, plan.trans_b, plan.m, plan.n, plan.k, 1.0f, ab.get() + plan.a_offset[i],
                          plan.lda, *b_weight, b_read, 0.0f, out.data() + i * c_size, plan.n);
          else
            kernels::gemm(plan.trans_a, plan.trans_b, plan.m, plan.n, plan.k, 1.0f, ab.get() + plan.a_offset[i],
                          plan.lda, bb.get() + plan.b_offset[i], plan.ldb, 0.0f, out.data() + i * c_size, plan.n);
        }
        return record<T>("matmul", std::move(out), {a, b},
                         [plan, ab, bb, b_weight, b_read, b_store = gradient_store(b)](BackwardContext<T>& ctx) {
                           matmul_backward_bf16(plan, ab, bb, b_weight, b_read, b_store, ctx);
                         });
      }
    }
    for (std::size_t i = 0; i < plan.a_offset.size() && !is_empty(plan); ++i)
      kernels::gemm<T>(plan.trans_a, plan.trans_b, plan.m, plan.n, plan.k, T(1), av + plan.a_offset[i], plan.lda,
                       bv + plan.b_offset[i], plan.ldb, T(0), out.data() + i * c_size, plan.n);
    return record<T>("matmul", std::move(out), {a, b}, [plan](BackwardContext<T>& ctx) { matmul_backward(plan, ctx); });
  });
}

}  // namespace xgrad

namespace xgrad {

namespace {

// The activation fused into a linear op: y = act(x W^T + b).
enum class Fused { none, relu, gelu, gelu_tanh };

// What one linear call computes.
struct LinearCall {
  const char* op;  // "linear", "linear_relu" or "linear_gelu", for the graph and the errors
  Fused activation;
  std::size_t rows, in, out;
};

bool is_gelu(Fused f) { return f == Fused::gelu || f == Fused::gelu_tanh; }

// y = act(h) over a block of h (rows x cols from h, row stride ld) into y, in place for
// relu; each result also rounded to bf16 into `rounded` (same row stride) when given.
template <class T>
void activate_block(Fused activation, const T* h, T* y, std::size_t ld, std::size_t rows, std::size_t cols,
                    kernels::bfloat16* rounded) {
  if (activation == Fused::relu) {
    kernels::relu_block(y, ld, rows, cols, rounded);
    return;
  }
  for (std::size_t r = 0; r < rows; ++r) {
    kernels::gelu_forward(h + r * ld, y + r * ld, cols, activation == Fused::gelu_tanh);
    if constexpr (std::is_same_v<T, float>)
      if (rounded) kernels::to_bfloat16_n(y + r * ld, cols, rounded + r * ld);
  }
}

// The gradient at the product's output h for rows [first, last) of dY (row length out):
// dY through the fused activation's gradient, into `dh` (which holds those rows). relu's
// reads its output y, GELU's its input h (`saved`).
template <class T>
void activation_gradient_rows(Fused activation, const T* g, const T* saved, std::size_t first, std::size_t last,
                              std::size_t out, T* dh) {
  const std::size_t offset = first * out, n = (last - first) * out;
  if (activation == Fused::relu)
    kernels::relu_gradient_n(g + offset, saved + offset, n, dh);
  else
    kernels::gelu_backward(g + offset, saved + offset, dh, n, activation == Fused::gelu_tanh, false);
}

// The gradient at linear's output h: the incoming one, or the fused activation's gradient
// of it (into `through`, which must outlive the pointer).
template <class T>
const T* product_gradient(BackwardContext<T>& ctx, Fused activation, const T* saved, xt::xarray<T>& through) {
  const T* g = ctx.grad().data();
  if (activation == Fused::none) return g;
  through = new_array<T>(ctx.op(), ctx.grad().shape());
  const std::size_t out = ctx.grad().shape().back(), rows = out ? through.size() / out : 0;
  parallel_for_chunks(rows, std::max<std::size_t>(1, kElementsPerChunk / std::max<std::size_t>(1, out)),
                      static_cast<double>(out), [&](std::size_t first, std::size_t last) {
                        activation_gradient_rows(activation, g, saved, first, last, out, through.data() + first * out);
                      });
  return through.data();
}

// linear's dY (through the fused activation's gradient) rounded to bf16 for the backward
// products, and its column sums added into db (when the bias wants a gradient) in the
// same pass, a chunk of rows at a time while in cache.
Bf16Copy rounded_with_column_sums(const float* g, Fused activation, const float* saved, std::size_t rows,
                                  std::size_t out, float* db) {
  std::shared_ptr<kernels::bfloat16[]> copy(new kernels::bfloat16[rows * out]);  // not zeroed: written next
  if (activation == Fused::none) {
    kernels::round_with_column_sums(g, rows, out, db, copy.get(), nullptr);
    return copy;
  }
  const kernels::RowsGradient through = [&](std::size_t first, std::size_t last, float* dh) {
    activation_gradient_rows(activation, g, saved, first, last, out, dh);
  };
  kernels::round_with_column_sums(g, rows, out, db, copy.get(), &through);
  return copy;
}

// linear with its products in bf16: x rounded once (or as kept with it) and kept for
// backward, W as bf16_weight keeps it; the bias added as the product is written. A fused
// activation runs on each block of the product as it is finished, while in cache, and
// rounds its result there for the product that reads y next (a feed-forward's second
// linear): two passes over y from memory saved each way.
Tensor linear_bf16(const Tensor& x, const Tensor& weight, const Tensor& bias, xt::xarray<float> y,
                   const LinearCall& call) {
  const auto [op, activation, rows, in, out] = call;
  const Bf16Copy xb = rounded_operand(x, rows, in);
  const std::shared_ptr<const kernels::Bf16Weight> wb = bf16_weight(weight, out, in);
  const kernels::WeightRead w_read = weight_read(weight);
  // GELU's input, kept for its gradient (relu's reads its output).
  xt::xarray<float> h = is_gelu(activation) ? new_array<float>(op, y.shape()) : xt::xarray<float>();
  std::unique_ptr<kernels::bfloat16[]> y_rounded(activation != Fused::none ? new kernels::bfloat16[rows * out]
                                                                           : nullptr);  // not zeroed: written next
  float* product = is_gelu(activation) ? h.data() : y.data();
  const kernels::BlockEpilogue activate = [&](std::size_t row, std::size_t count, std::size_t col, std::size_t cols) {
    const std::size_t at = row * out + col;
    activate_block(activation, product + at, y.data() + at, out, count, cols, y_rounded.get() + at);
  };
  kernels::gemm(false, true, rows, out, in, 1.0f, xb.get(), in, *wb, w_read, 0.0f, product, out,
                bias.defined() ? bias.node()->values<float>().data() : nullptr,
                activation != Fused::none ? &activate : nullptr);
  Tensor result = record<float>(
      op, std::move(y), {x, weight, bias},
      [call, xb, wb, w_read, w_store = gradient_store(weight), h = std::move(h)](BackwardContext<float>& ctx) {
        const auto [op, activation, rows, in, out] = call;
        float* db = ctx.needs_grad(2) ? ctx.grad_buffer(2).data() : nullptr;
        const float* saved = is_gelu(activation) ? h.data() : ctx.output().data();
        if (rows && out && in) {
          const Bf16Copy g = rounded_with_column_sums(ctx.grad().data(), activation, saved, rows, out, db);
          if (ctx.needs_grad(0)) {  // dx = g W
            const auto dx = ctx.grad_target(0);
            kernels::gemm(false, false, rows, in, out, 1.0f, g.get(), out, *wb, w_read, dx.beta(), dx.data, in);
          }
          if (ctx.needs_grad(1)) {  // dW = g^T x
            const auto dw = ctx.grad_target(1);
            kernels::gemm(true, false, out, in, rows, 1.0f, g.get(), out, xb.get(), in, dw.beta(), dw.data, in, nullptr,
                          w_store);
          }
        } else {
          for (std::size_t i = 0; i < 2; ++i)
            if (ctx.needs_grad(i)) ctx.grad_buffer(i);
          xt::xarray<float> through;
          if (db) kernels::add_column_sums(product_gradient(ctx, activation, saved, through), rows, out, db);
        }
      });
  if (activation != Fused::none && rows && out) {
    Node& node = *result.node();
    node.bf16_weight.store(std::make_shared<const kernels::Bf16Weight>(
        std::move(y_rounded), node.values<float>().data(), rows, out, node.version->load(std::memory_order_relaxed)));
  }
  return result;
}

Tensor linear_op(const char* op, Fused activation, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_same_dtype(op, x, weight);
  const Shape x_shape = x.shape(), w_shape = weight.shape();
  XGRAD_CHECK(!x_shape.empty() && w_shape.size() == 2 && w_shape[1] == x_shape.back(), op, "input ", x_shape,
              " does not fit weight ", w_shape, " (expected input [..., in] and weight [out, in])");
  const std::size_t in = w_shape[1], out = w_shape[0];
  if (bias.defined()) {
    check_same_dtype(op, x, bias);
    XGRAD_CHECK(bias.shape() == Shape{out}, op, "bias of shape ", bias.shape(), " does not fit weight ", w_shape,
                " (expected [", out, "])");
  }
  const std::size_t rows = in ? numel(x_shape) / in : numel(Shape(x_shape.begin(), x_shape.end() - 1));
  const LinearCall call{op, activation, rows, in, out};
  Shape out_shape = x_shape;
  out_shape.back() = out;
  return dispatch_op(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    xt::xarray<T> y = new_array<T>(op, out_shape);
    if constexpr (std::is_same_v<T, float>) {
      if (products_in_bf16<T>()) return linear_bf16(x, weight, bias, std::move(y), call);
    }
    T* yv = y.data();
    // GELU's input, kept for its gradient; the product writes y itself otherwise.
    xt::xarray<T> h = is_gelu(activation) ? new_array<T>(op, out_shape) : xt::xarray<T>();
    T* product = is_gelu(activation) ? h.data() : yv;
    kernels::fill_rows(product, bias.defined() ? bias.node()->values<T>().data() : nullptr, rows, out);
    // The activation on each block of the product as it is finished, while in cache.
    const kernels::BlockEpilogue activate = [&](std::size_t row, std::size_t count, std::size_t col, std::size_t cols) {
      const std::size_t at = row * out + col;
      activate_block<T>(activation, product + at, yv + at, out, count, cols, nullptr);
    };
    const kernels::BlockEpilogue* epilogue = activation != Fused::none ? &activate : nullptr;
    if (rows && out && in)  // h = x W^T + h, the bias (or zeros) as GEMM's accumulator
      kernels::gemm<T>(false, true, rows, out, in, T(1), x.node()->values<T>().data(), in,
                       weight.node()->values<T>().data(), in, T(1), product, out, epilogue);
    else if (epilogue)
      activate(0, rows, 0, out);
    return record<T>(op, std::move(y), {x, weight, bias}, [call, h = std::move(h)](BackwardContext<T>& ctx) {
      const auto [op, activation, rows, in, out] = call;
      xt::xarray<T> through;
      const T* g = product_gradient(ctx, activation, is_gelu(activation) ? h.data() : ctx.output().data(), through);
      if (rows && out && in) {
        if (ctx.needs_grad(0)) {  // dx = g W
          const auto dx = ctx.grad_target(0);
          kernels::gemm<T>(false, false, rows, in, out, T(1), g, out, ctx.input(1).data(), in, dx.beta(), dx.data, in);
        }
        if (ctx.needs_grad(1)) {  // dW = g^T x
          const auto dw = ctx.grad_target(1);
          kernels::gemm<T>(true, false, out, in, rows, T(1), g, out, ctx.input(0).data(), in, dw.beta(), dw.data, in);
        }
      } else {  // an empty product: zero gradients, as PyTorch's
        for (std::size_t i = 0; i < 2; ++i)
          if (ctx.needs_grad(i)) ctx.grad_buffer(i);
      }
      if (ctx.needs_grad(2)) kernels::add_column_sums(g, rows, out, ctx.grad_buffer(2).data());
    });
  });
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return linear_op("linear", Fused::none, x, weight, bias);
}

Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return linear_op("linear_relu", Fused::relu, x, weight, bias);
}

Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias, bool approximate) {
  return linear_op("linear_gelu", approximate ? Fused::gelu_tanh : Fused::gelu, x, weight, bias);
}

}  // namespace xgrad
