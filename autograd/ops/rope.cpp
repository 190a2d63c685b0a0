// Rotary position embedding: the checks and the rows' layout here, the table of angles
// and the rotation in kernels/rope.cpp.

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "xgrad/autograd/kernels/rope.hpp"
#include "xgrad/autograd/ops.hpp"
#include "xgrad/autograd/record.hpp"

namespace xgrad {

namespace {

constexpr const char* kOp = "rope";

// What one call rotates: the rows and their heads, the first column read in each row of
// x, and whether those columns are all of x's (else the others get no gradient).
struct RopeLayout {
  kernels::RopeRows rows;
  std::size_t begin = 0;
  bool whole = true;
  Shape out_shape;
};

// The options against a head width; returns the rotated columns of each head.
std::size_t rotary_dim_of(const RopeOptions& o, std::size_t head_dim, std::size_t length, const std::string& describe) {
  XGRAD_CHECK(head_dim != 0 && head_dim % 2 == 0, kOp, "each head's width must be even and positive, got ", head_dim,
              ": ", describe);
  XGRAD_CHECK(std::isfinite(o.theta) && o.theta > 0.0, kOp, "theta = ", o.theta, " must be finite and > 0: ", describe);
  const std::size_t rotary_dim = o.rotary_dim ? o.rotary_dim : head_dim;
  XGRAD_CHECK(rotary_dim % 2 == 0 && rotary_dim <= head_dim, kOp, "rotary_dim ", o.rotary_dim,
              " must be even and at most the head width ", head_dim, ": ", describe);
  if (!o.frequencies.empty()) {
    XGRAD_CHECK(o.frequencies.size() == rotary_dim / 2, kOp, "frequencies has ", o.frequencies.size(),
                " entries, where rotary_dim ", rotary_dim, " turns ", rotary_dim / 2, " pairs: ", describe);
    for (std::size_t i = 0; i < o.frequencies.size(); ++i)
      XGRAD_CHECK(std::isfinite(o.frequencies[i]) && o.frequencies[i] >= 0.0, kOp, "frequencies[", i,
                  "] = ", o.frequencies[i], " must be finite and >= 0: ", describe);
  }
  // Positions are exact in double (where the angles are computed) below 2^53.
  constexpr std::size_t kExact = std::size_t{1} << 53;
  XGRAD_CHECK(o.offset < kExact && length <= kExact - o.offset, kOp, "positions offset ", o.offset, " + ", length,
              " reach 2^53: ", describe);
  return rotary_dim;
}

Tensor rotate(const Tensor& x, const RopeLayout& layout, const RopeOptions& options) {
  return dispatch_op(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const kernels::RopeRows& r = layout.rows;
    // cos and sin of every position, kept for backward: no larger than x's rows.
    const std::size_t angles = r.rows ? r.length * (r.rotary_dim / 2) : 0;
    auto table = std::make_shared<std::vector<T>>(2 * angles);
    const std::vector<double> frequencies =
        options.frequencies.empty() ? rope_frequencies(options.theta, r.rotary_dim) : options.frequencies;
    kernels::rope_table(frequencies.data(), r.rotary_dim / 2, options.offset, r.rows ? r.length : 0, table->data(),
                        table->data() + angles);
    xt::xarray<T> out = new_array<T>(kOp, layout.out_shape);
    kernels::rope_rotate(r, table->data(), table->data() + angles, x.node()->values<T>().data() + layout.begin,
                         out.data(), /*inverse=*/false, /*add=*/false);
    return record<T>(kOp, std::move(out), {x}, [layout, table, angles](BackwardContext<T>& ctx) {
      if (!ctx.needs_grad(0)) return;
      // A rotation's transpose is its inverse: the output's gradient turned back, from the
      // output's dense rows into x's.
      kernels::RopeRows back = layout.rows;
      std::swap(back.in_stride, back.out_stride);
      const T* cos = table->data();
      const T* sin = cos + angles;
      if (layout.whole) {
        const auto target = ctx.grad_target(0);
        kernels::rope_rotate(back, cos, sin, ctx.grad().data(), target.data, /*inverse=*/true, !target.fresh);
      } else {  // the columns outside the range keep a zero (or earlier) gradient
        T* dx = ctx.grad_buffer(0).data() + layout.begin;
        kernels::rope_rotate(back, cos, sin, ctx.grad().data(), dx, /*inverse=*/true, /*add=*/true);
      }
    });
  });
}

}  // namespace

std::vector<double> rope_frequencies(double theta, std::size_t rotary_dim) {
  std::vector<double> frequencies(rotary_dim / 2);
  for (std::size_t i = 0; i < frequencies.size(); ++i)
    frequencies[i] = std::pow(theta, -static_cast<double>(2 * i) / static_cast<double>(rotary_dim));
  return frequencies;
}

Tensor rope(const Tensor& x, const RopeOptions& options) {
  check_defined(kOp, x);
  const Shape shape = x.shape();
  const std::string describe = "x " + shape_str(shape);
  XGRAD_CHECK(shape.size() >= 2, kOp, "x must be [..., T, D], at least 2 axes: ", describe);
  RopeLayout l;
  const std::size_t d = shape.back();
  l.rows.length = shape[shape.size() - 2];
  l.rows.rotary_dim = rotary_dim_of(options, d, l.rows.length, describe);
  l.rows.rows = x.numel() / d;
  l.rows.head_dim = d;
  l.rows.in_stride = l.rows.out_stride = d;
  l.out_shape = shape;
  return rotate(x, l, options);
}

Tensor rope(const Columns& x, std::size_t heads, const RopeOptions& options) {
  check_defined(kOp, x.tensor);
  const Shape shape = x.tensor.shape();
  const std::string describe = str("x ", shape, " columns [", x.begin, ", +", x.width, "), heads ", heads);
  XGRAD_CHECK(heads != 0, kOp, "heads must be positive: ", describe);
  XGRAD_CHECK(shape.size() == 3, kOp, "x must be [N, L, C] for a column range: ", describe);
  const std::size_t c = shape[2], width = x.width ? x.width : c - std::min(c, x.begin);
  XGRAD_CHECK(x.begin <= c && width <= c - x.begin && width != 0 && width % heads == 0, kOp,
              "the column range must lie inside x and split into equal heads: ", describe);
  RopeLayout l;
  l.rows.length = shape[1];
  l.rows.rotary_dim = rotary_dim_of(options, width / heads, l.rows.length, describe);
  l.rows.rows = shape[0] * shape[1];
  l.rows.heads = heads;
  l.rows.head_dim = width / heads;
  l.rows.in_stride = c;
  l.rows.out_stride = width;
  l.begin = x.begin;
  l.whole = width == c;
  l.out_shape = {shape[0], shape[1], width};
  return rotate(x.tensor, l, options);
}

}  // namespace xgrad
