// Embedding lookup: gather rows by integer id; backward scatter-adds into those rows.

#include <algorithm>

#include "xgrad/autograd/ops.hpp"
#include "xgrad/autograd/record.hpp"

namespace xgrad {

Tensor embedding(const Tensor& weight, const Indices& ids) {
  check_defined("embedding", weight);
  ids.check("embedding");
  const Shape w_shape = weight.shape();
  XGRAD_CHECK(w_shape.size() == 2, "embedding", "weight must be 2-D [num, dim], got ", w_shape);
  const std::size_t num = w_shape[0], dim = w_shape[1];
  for (std::size_t i = 0; i < ids.numel(); ++i)
    XGRAD_CHECK(ids.values[i] >= 0 && static_cast<std::size_t>(ids.values[i]) < num, "embedding", "id ", ids.values[i],
                " at position ", i, " of ids ", ids.shape, " is outside [0, ", num, ") for weight ", w_shape);
  Shape out_shape = ids.shape;
  out_shape.push_back(dim);
  return dispatch(weight.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* w = weight.node()->values<T>().data();
    xt::xarray<T> out = xt::xarray<T>::from_shape(to_xshape<T>(out_shape));
    for (std::size_t i = 0; i < ids.numel(); ++i) std::copy_n(w + ids.values[i] * dim, dim, out.data() + i * dim);
    return record<T>("embedding", std::move(out), {weight}, [rows = ids.values, dim](BackwardContext<T>& ctx) {
      T* dw = ctx.grad_buffer(0).data();
      const T* g = ctx.grad().data();
      for (std::size_t i = 0; i < rows.size(); ++i)
        for (std::size_t j = 0; j < dim; ++j) dw[rows[i] * dim + j] += g[i * dim + j];
    });
  });
}

}  // namespace xgrad
