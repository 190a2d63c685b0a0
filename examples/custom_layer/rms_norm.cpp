#include "rms_norm.hpp"

#include <cmath>

using namespace xgrad;

namespace {

// Rows of length d: y = x * r * w with r = 1 / sqrt(mean(x^2) + eps).
template <class T>
void forward_rows(const T* x, const T* w, T* y, std::size_t rows, std::size_t d, double eps) {
  for (std::size_t r = 0; r < rows; ++r) {
    const T* xr = x + r * d;
    double squares = 0;
    for (std::size_t j = 0; j < d; ++j) squares += double(xr[j]) * xr[j];
    const T inv_rms = static_cast<T>(1.0 / std::sqrt(squares / d + eps));
    for (std::size_t j = 0; j < d; ++j) y[r * d + j] = xr[j] * inv_rms * w[j];
  }
}

// With g = dy * w:  dx = r * g - x * r^3 * mean(g * x),   dw = sum over rows of dy * x * r
template <class T>
void backward_rows(const T* x, const T* w, const T* dy, T* dx, T* dw, std::size_t rows, std::size_t d, double eps) {
  for (std::size_t r = 0; r < rows; ++r) {
    const T* xr = x + r * d;
    const T* gr = dy + r * d;
    double squares = 0, g_dot_x = 0;
    for (std::size_t j = 0; j < d; ++j) {
      squares += double(xr[j]) * xr[j];
      g_dot_x += double(gr[j]) * w[j] * xr[j];
    }
    const double inv_rms = 1.0 / std::sqrt(squares / d + eps);
    const double correction = inv_rms * inv_rms * inv_rms * g_dot_x / d;
    for (std::size_t j = 0; j < d; ++j) {
      dx[r * d + j] = static_cast<T>(inv_rms * gr[j] * w[j] - xr[j] * correction);
      dw[j] += static_cast<T>(gr[j] * xr[j] * inv_rms);
    }
  }
}

std::size_t rows_of(const Tensor& x) { return x.numel() / x.shape().back(); }

}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  XGRAD_CHECK(x.dim() != 0 && weight.shape() == Shape{x.shape().back()} && x.dtype() == weight.dtype(), "rms_norm",
              "input ", x.shape(), " does not fit weight ", weight.shape());
  const CustomOp op{"rms_norm",
                    [eps](const std::vector<Tensor>& in) {
                      Tensor y = Tensor::zeros(in[0].shape(), in[0].dtype());
                      const std::size_t d = in[0].shape().back();
                      dispatch(y.dtype(), [&](auto tag) {
                        using T = decltype(tag);
                        forward_rows(in[0].data<T>(), in[1].data<T>(), y.data<T>(), rows_of(in[0]), d, eps);
                      });
                      return y;
                    },
                    [eps](const std::vector<Tensor>& in, const Tensor&, const Tensor& grad) {
                      Tensor dx = Tensor::zeros(in[0].shape(), in[0].dtype()),
                             dw = Tensor::zeros(in[1].shape(), in[1].dtype());
                      const std::size_t d = in[0].shape().back();
                      dispatch(dx.dtype(), [&](auto tag) {
                        using T = decltype(tag);
                        backward_rows(in[0].data<T>(), in[1].data<T>(), grad.data<T>(), dx.data<T>(), dw.data<T>(),
                                      rows_of(in[0]), d, eps);
                      });
                      return std::vector<Tensor>{dx, dw};
                    }};
  return apply(op, {x, weight});
}

RMSNorm::RMSNorm(std::size_t d, double eps) : weight(register_parameter("weight", Tensor::ones({d}))), eps(eps) {}

Tensor RMSNorm::forward(const Tensor& x) { return rms_norm(x, weight, eps); }

std::string RMSNorm::extra_repr() const { return str(weight.numel()); }
