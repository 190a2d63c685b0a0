#include "xgrad/autograd/kernels/softmax.hpp"

#include "xgrad/autograd/kernels/vexp.hpp"
#include "xgrad/autograd/parallel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace xgrad::kernels {

namespace {

// Per-column maximum of one [n, inner] block; NaN when the column holds a NaN (which
// then spreads to the whole softmax row, as in PyTorch). A column that is -inf
// throughout (every entry masked) gets 0, so that exp(x - max) is 0 there, not NaN.
template <class T>
void column_max(const T* x, std::size_t n, std::size_t inner, T* max) {
  std::fill(max, max + inner, -std::numeric_limits<T>::infinity());
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t i = 0; i < inner; ++i) max[i] = max_or_nan(max[i], x[j * inner + i]);
  for (std::size_t i = 0; i < inner; ++i)
    if (std::isinf(max[i]) && max[i] < 0) max[i] = T(0);
}

}  // namespace

template <class T>
void softmax_forward(const T* x, T* y, std::size_t outer, std::size_t n, std::size_t inner) {
  std::vector<T> max(inner), sum(inner);
  for (std::size_t o = 0; o < outer; ++o) {
    const T* xb = x + o * n * inner;
    T* yb = y + o * n * inner;
    column_max(xb, n, inner, max.data());
    std::fill(sum.begin(), sum.end(), T(0));
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t i = 0; i < inner; ++i) {
        const T e = std::exp(xb[j * inner + i] - max[i]);
        yb[j * inner + i] = e;
        sum[i] += e;
      }
    // A row of all -inf has no probability mass: it stays all zeros (a NaN sum stays NaN).
    for (std::size_t i = 0; i < inner; ++i) sum[i] = sum[i] == T(0) ? T(0) : T(1) / sum[i];
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t i = 0; i < inner; ++i) yb[j * inner + i] *= sum[i];
  }
}

template <class T>
void log_softmax_forward(const T* x, T* y, std::size_t outer, std::size_t n, std::size_t inner) {
  std::vector<T> max(inner), log_sum(inner);
  for (std::size_t o = 0; o < outer; ++o) {
    const T* xb = x + o * n * inner;
    T* yb = y + o * n * inner;
    column_max(xb, n, inner, max.data());
    std::fill(log_sum.begin(), log_sum.end(), T(0));
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t i = 0; i < inner; ++i) log_sum[i] += std::exp(xb[j * inner + i] - max[i]);
    for (std::size_t i = 0; i < inner; ++i) log_sum[i] = std::log(log_sum[i]);
    // A row of all -inf gives -inf (the log of zero mass), not NaN.
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t i = 0; i < inner; ++i)
        yb[j * inner + i] = std::isinf(log_sum[i]) ? log_sum[i] : (xb[j * inner + i] - max[i]) - log_sum[i];
  }
}

template <class T>
void softmax_backward(const T* y, const T* dy, T* dx, std::size_t outer, std::size_t n, std::size_t inner) {
  std::vector<T> dot(inner);
  for (std::size_t o = 0; o < outer; ++o) {
    const std::size_t base = o * n * inner;
    std::fill(dot.begin(), dot.end(), T(0));
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t i = 0; i < inner; ++i) dot[i] += dy[base + j * inner + i] * y[base + j * inner + i];
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t i = 0; i < inner; ++i) {
        const std::size_t e = base + j * inner + i;
        dx[e] = y[e] * (dy[e] - dot[i]);
      }
  }
}

template <class T>
void log_softmax_backward(const T* y, const T* dy, T* dx, std::size_t outer, std::size_t n, std::size_t inner) {
  std::vector<T> total(inner);
  for (std::size_t o = 0; o < outer; ++o) {
    const std::size_t base = o * n * inner;
    std::fill(total.begin(), total.end(), T(0));
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t i = 0; i < inner; ++i) total[i] += dy[base + j * inner + i];
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t i = 0; i < inner; ++i) {
        const std::size_t e = base + j * inner + i;
        dx[e] = dy[e] - std::exp(y[e]) * total[i];
      }
  }
}

template <class T>
void logsumexp_rows(const T* x, T* max, T* log_sum, std::size_t rows, std::size_t n) {
  // Rows in parallel, each whole on one thread: the same bits on any thread count. The
  // exponentials in SIMD (kernels/vexp.hpp), into a scratch row of the thread's own.
  parallel_for(rows, 4.0 * static_cast<double>(n), [&](std::size_t r) {
    thread_local std::vector<T> scratch;
    scratch.resize(n);
    const T* row = x + r * n;
    const T row_max = max_of(row, n);                              // in SIMD; NaN when any is
    max[r] = std::isinf(row_max) && row_max < 0 ? T(0) : row_max;  // as column_max: an all -inf row shifts by 0
    log_sum[r] = std::log(exp_shifted_to(row, scratch.data(), n, max[r], T(0)));
  });
}

#define XGRAD_INSTANTIATE(T)                                                                            \
  template void softmax_forward<T>(const T*, T*, std::size_t, std::size_t, std::size_t);                \
  template void log_softmax_forward<T>(const T*, T*, std::size_t, std::size_t, std::size_t);            \
  template void softmax_backward<T>(const T*, const T*, T*, std::size_t, std::size_t, std::size_t);     \
  template void log_softmax_backward<T>(const T*, const T*, T*, std::size_t, std::size_t, std::size_t); \
  template void logsumexp_rows<T>(const T*, T*, T*, std::size_t, std::size_t);
XGRAD_INSTANTIATE(float)
XGRAD_INSTANTIATE(double)
#undef XGRAD_INSTANTIATE

}  // namespace xgrad::kernels
