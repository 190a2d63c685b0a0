#include "xgrad/autograd/kernels/loss.hpp"

#include <algorithm>
#include <cmath>

#include "xgrad/autograd/kernels/vexp.hpp"
#include "xgrad/autograd/parallel.hpp"

namespace xgrad::kernels {

namespace {

// Rows are independent: each is computed whole by one thread, so the bits do not depend on
// the thread count. The pool's estimate of a row's work: an exponential per class, in SIMD.
constexpr double kWorkPerClass = 4;

template <class Body>
void for_each_row(std::size_t rows, std::size_t classes, const Body& body) {
  parallel_for(rows, kWorkPerClass * static_cast<double>(classes), body);
}

}  // namespace

template <class T>
T cross_entropy_forward(const LogitRows<T>& l, const std::int64_t* targets, std::int64_t ignore, const T* w, T keep,
                        T eps, T* loss) {
  const std::size_t classes = l.classes;
  for_each_row(l.rows, eps != T(0) ? classes : 1, [&](std::size_t r) {
    T nll = 0, smooth = 0;  // -w_t log p_t and -sum_c w_c log p_c
    const std::int64_t t = targets[r];
    if (t != ignore) {
      const T* row = l.x + r * classes;
      nll = w[t] * (l.log_sum[r] - (row[t] - l.max[r]));
      if (eps != T(0)) {
        T total = 0;
        for (std::size_t c = 0; c < classes; ++c) total += w[c] * (l.log_sum[r] - (row[c] - l.max[r]));
        smooth = total;
      }
    }
    loss[r] = keep * nll + eps / static_cast<T>(classes) * smooth;
  });
  double counted = 0;  // in row order, in double as every sum of many terms
  for (std::size_t r = 0; r < l.rows; ++r)
    if (targets[r] != ignore) counted += w[targets[r]];
  return static_cast<T>(counted);
}

template <class T>
void cross_entropy_backward(const LogitRows<T>& l, const std::int64_t* targets, std::int64_t ignore, const T* w,
                            T weight_sum, T keep, T eps, const RowGrad<T>& g, T* dx) {
  const std::size_t classes = l.classes;
  for_each_row(l.rows, classes, [&](std::size_t r) {
    T* d = dx + r * classes;
    const std::int64_t t = targets[r];
    if (t == ignore) {
      std::fill(d, d + classes, T(0));
      return;
    }
    const T g_r = g.at(r);
    const T a = g_r * keep * w[t];                                          // on w_t (p - onehot(t))
    const T b = g_r * eps / static_cast<T>(classes);                        // on p sum(w) - w
    exp_shifted_to(l.x + r * classes, d, classes, l.max[r], l.log_sum[r]);  // p, in SIMD
    for (std::size_t c = 0; c < classes; ++c) d[c] = a * d[c] + b * (d[c] * weight_sum - w[c]);
    d[t] -= a;
  });
}

template <class T>
void cross_entropy_probabilities_forward(const LogitRows<T>& l, const T* q, const T* w, T keep, T uniform, T* loss) {
  const std::size_t classes = l.classes;
  for_each_row(l.rows, classes, [&](std::size_t r) {
    T total = 0;
    for (std::size_t c = 0; c < classes; ++c) {
      // A class of no weight or mass adds nothing, even where log p is -inf (0 log 0 = 0).
      const T coefficient = w[c] * (keep * q[r * classes + c] + uniform);
      if (coefficient != T(0)) total += coefficient * (l.log_sum[r] - (l.x[r * classes + c] - l.max[r]));
    }
    loss[r] = total;
  });
}

template <class T>
void cross_entropy_probabilities_backward(const LogitRows<T>& l, const T* q, const T* w, T keep, T uniform,
                                          const RowGrad<T>& g, T* dx, T* dq) {
  const std::size_t classes = l.classes;
  for_each_row(l.rows, classes, [&](std::size_t r) {
    const T g_r = g.at(r);
    const std::size_t at = r * classes;
    T mass = 0;  // sum_c w_c q'_c
    for (std::size_t c = 0; c < classes; ++c) mass += w[c] * (keep * q[at + c] + uniform);
    for (std::size_t c = 0; c < classes; ++c) {
      const T log_p = (l.x[at + c] - l.max[r]) - l.log_sum[r];
      dx[at + c] = g_r * (std::exp(log_p) * mass - w[c] * (keep * q[at + c] + uniform));
      dq[at + c] = -g_r * keep * w[c] * log_p;
    }
  });
}

template float cross_entropy_forward<float>(const LogitRows<float>&, const std::int64_t*, std::int64_t, const float*,
                                            float, float, float*);
template double cross_entropy_forward<double>(const LogitRows<double>&, const std::int64_t*, std::int64_t,
                                              const double*, double, double, double*);
template void cross_entropy_backward<float>(const LogitRows<float>&, const std::int64_t*, std::int64_t, const float*,
                                            float, float, float, const RowGrad<float>&, float*);
template void cross_entropy_backward<double>(const LogitRows<double>&, const std::int64_t*, std::int64_t, const double*,
                                             double, double, double, const RowGrad<double>&, double*);
template void cross_entropy_probabilities_forward<float>(const LogitRows<float>&, const float*, const float*, float,
                                                         float, float*);
template void cross_entropy_probabilities_forward<double>(const LogitRows<double>&, const double*, const double*,
                                                          double, double, double*);
template void cross_entropy_probabilities_backward<float>(const LogitRows<float>&, const float*, const float*, float,
                                                          float, const RowGrad<float>&, float*, float*);
template void cross_entropy_probabilities_backward<double>(const LogitRows<double>&, const double*, const double*,
                                                           double, double, const RowGrad<double>&, double*, double*);

}  // namespace xgrad::kernels
