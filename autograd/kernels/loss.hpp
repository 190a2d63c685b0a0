#pragma once
// Cross-entropy's row loops, over logits whose rows are the classes. Only each row's max
// and log-sum of the shifted exponentials (logsumexp_rows, kernels/softmax.hpp) are kept:
// log p_c = (x_c - max) - log_sum, and backward recomputes the softmax from them.

#include <cstddef>
#include <cstdint>

namespace xgrad::kernels {

template <class T>
struct LogitRows {
  const T* x = nullptr;  // [rows, classes], contiguous
  const T* max = nullptr;
  const T* log_sum = nullptr;
  std::size_t rows = 0, classes = 0;
};

// The upstream gradient of each row: grad[r] (one per row, reduction none), or the
// scalar grad[0] times scale.
template <class T>
struct RowGrad {
  const T* grad = nullptr;
  bool per_row = false;
  T scale = 1;

  T at(std::size_t r) const { return per_row ? grad[r] : grad[0] * scale; }
};

// Class targets with weights w (one per class) and label smoothing eps (keep = 1 - eps):
// loss[r] = keep w_t (-log p_t) + eps / C sum_c w_c (-log p_c), 0 for an ignored target.
// Returns the weight of the counted targets.
template <class T>
T cross_entropy_forward(const LogitRows<T>& l, const std::int64_t* targets, std::int64_t ignore, const T* w, T keep,
                        T eps, T* loss);
// dx (written whole) = g (keep w_t (p - onehot(t)) + eps / C (p sum(w) - w)), 0 on
// ignored rows; weight_sum = sum(w).
template <class T>
void cross_entropy_backward(const LogitRows<T>& l, const std::int64_t* targets, std::int64_t ignore, const T* w,
                            T weight_sum, T keep, T eps, const RowGrad<T>& g, T* dx);

// Target probabilities q, smoothed to q' = keep q + uniform:
// loss[r] = -sum_c w_c q'_c log p_c.
template <class T>
void cross_entropy_probabilities_forward(const LogitRows<T>& l, const T* q, const T* w, T keep, T uniform, T* loss);
// dx = g (p sum_c(w_c q'_c) - w q') and dq = -g keep w log p, both written whole.
template <class T>
void cross_entropy_probabilities_backward(const LogitRows<T>& l, const T* q, const T* w, T keep, T uniform,
                                          const RowGrad<T>& g, T* dx, T* dq);

}  // namespace xgrad::kernels
