#include "snake.hpp"

#include <cmath>
#include <vector>

using namespace xgrad;

namespace {

// sin(u) / u, with its limit 1 at u = 0. Below 1e-4 the series 1 - u^2 / 6 is exact to
// double precision (the next term, u^4 / 120, is under 1e-18).
double sinc(double u) { return std::abs(u) < 1e-4 ? 1.0 - u * u / 6.0 : std::sin(u) / u; }

// n elements, alpha[i % d] for element i (alpha runs along the last axis), in double
// whatever T is. With u = alpha x:
//   y = x + x sin(u) sinc(u)
template <class T>
void forward_loop(const T* x, const T* alpha, T* y, std::size_t n, std::size_t d) {
  for (std::size_t i = 0; i < n; ++i) {
    const double xi = x[i], u = alpha[i % d] * xi;
    y[i] = static_cast<T>(xi + xi * std::sin(u) * sinc(u));
  }
}

//   dy/dx     = 1 + sin(2u)
//   dy/dalpha = x^2 sinc(u) (2 cos(u) - sinc(u))
// the second from d/du (sin^2(u) / u) = sin(2u) / u - sin^2(u) / u^2, again without
// 1 / alpha (it is x^2 at alpha = 0).
template <class T>
void backward_loop(const T* x, const T* alpha, const T* dy, T* dx, T* dalpha, std::size_t n, std::size_t d) {
  std::vector<double> dalpha_sum(d, 0.0);  // dalpha is a sum over the rows: kept in double
  for (std::size_t i = 0; i < n; ++i) {
    const double xi = x[i], u = alpha[i % d] * xi, s = sinc(u);
    dx[i] = static_cast<T>(dy[i] * (1.0 + std::sin(2.0 * u)));
    dalpha_sum[i % d] += dy[i] * xi * xi * s * (2.0 * std::cos(u) - s);
  }
  for (std::size_t j = 0; j < d; ++j) dalpha[j] = static_cast<T>(dalpha_sum[j]);
}

}  // namespace

Tensor snake(const Tensor& x, const Tensor& alpha) {
  XGRAD_CHECK(x.dim() != 0 && alpha.shape() == Shape{x.shape().back()} && x.dtype() == alpha.dtype(), "snake", "input ",
              x.dtype(), " ", x.shape(), " does not fit alpha ", alpha.dtype(), " ", alpha.shape(),
              " (one alpha per feature of the last axis, of the input's dtype)");
  const CustomOp op{"snake",
                    [](const std::vector<Tensor>& in) {
                      Tensor y = Tensor::zeros(in[0].shape(), in[0].dtype());
                      dispatch(y.dtype(), [&](auto tag) {
                        using T = decltype(tag);
                        forward_loop(in[0].data<T>(), in[1].data<T>(), y.data<T>(), y.numel(), in[1].numel());
                      });
                      return y;
                    },
                    [](const std::vector<Tensor>& in, const Tensor&, const Tensor& grad) {
                      Tensor dx = Tensor::zeros(in[0].shape(), in[0].dtype()),
                             dalpha = Tensor::zeros(in[1].shape(), in[1].dtype());
                      dispatch(dx.dtype(), [&](auto tag) {
                        using T = decltype(tag);
                        backward_loop(in[0].data<T>(), in[1].data<T>(), grad.data<T>(), dx.data<T>(), dalpha.data<T>(),
                                      dx.numel(), dalpha.numel());
                      });
                      return std::vector<Tensor>{dx, dalpha};
                    }};
  return op.apply({x, alpha});
}

Snake::Snake(std::size_t d, double alpha) : alpha(register_parameter("alpha", Tensor::full({d}, alpha))) {}

Tensor Snake::forward(const Tensor& x) { return snake(x, alpha); }

std::string Snake::extra_repr() const { return str(alpha.numel()); }
