#include "optim/clip.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace xgrad::optim {

namespace {

// Runs f(pointer, count) on each gradient's contiguous storage, typed.
template <class F>
void for_each_grad(const std::vector<Tensor>& parameters, F&& f) {
  for (const Tensor& p : parameters) {
    if (!p.defined()) continue;
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (g.dtype() == DType::float32) f(g.data<float>(), g.numel());
    else f(g.data<double>(), g.numel());
  }
}

}  // namespace

double clip_grad_norm(const std::vector<Tensor>& parameters, double max_norm) {
  XGRAD_CHECK(max_norm > 0.0, "clip_grad_norm", "max_norm ", max_norm, " must be > 0");
  double squares = 0;
  for_each_grad(parameters, [&](auto* g, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) squares += static_cast<double>(g[i]) * static_cast<double>(g[i]);
  });
  const double norm = std::sqrt(squares);
  XGRAD_CHECK(std::isfinite(norm), "clip_grad_norm", "the total gradient norm is not finite (", norm, ")");
  const double scale = max_norm / (norm + 1e-6);
  if (scale < 1.0)
    for_each_grad(parameters, [&](auto* g, std::size_t n) {
      using T = std::remove_pointer_t<decltype(g)>;
      for (std::size_t i = 0; i < n; ++i) g[i] *= static_cast<T>(scale);
    });
  return norm;
}

void clip_grad_value(const std::vector<Tensor>& parameters, double clip) {
  XGRAD_CHECK(clip >= 0.0, "clip_grad_value", "clip ", clip, " must be >= 0");
  for_each_grad(parameters, [&](auto* g, std::size_t n) {
    using T = std::remove_pointer_t<decltype(g)>;
    const T c = static_cast<T>(clip);
    for (std::size_t i = 0; i < n; ++i) g[i] = std::clamp(g[i], -c, c);
  });
}

}  // namespace xgrad::optim
