#pragma once
// Softmax and log-softmax over the middle axis of a contiguous [outer, n, inner] block
// (inner == 1 is the common "last axis" case). Rows are shifted by their maximum first,
// so large logits do not overflow. A row that is -inf throughout (fully masked) gives
// zeros from softmax and -inf from log_softmax, never NaN.

#include <cstddef>

namespace xgrad::kernels {

template <class T>
void softmax_forward(const T* x, T* y, std::size_t outer, std::size_t n, std::size_t inner);
template <class T>
void log_softmax_forward(const T* x, T* y, std::size_t outer, std::size_t n, std::size_t inner);

// dx = y * (dy - sum(dy * y)), with y the softmax output.
template <class T>
void softmax_backward(const T* y, const T* dy, T* dx, std::size_t outer, std::size_t n, std::size_t inner);
// dx = dy - exp(y) * sum(dy), with y the log-softmax output.
template <class T>
void log_softmax_backward(const T* y, const T* dy, T* dx, std::size_t outer, std::size_t n, std::size_t inner);

}  // namespace xgrad::kernels

namespace xgrad::kernels {

// For each contiguous row of n elements: its max and log(sum_j exp(x[r, j] - max)).
// Kept apart because (x - max) - log_sum is accurate where x - (max + log_sum) is not
// (float32 logits near 1000 lose four digits). A row of all -inf gets max 0 and
// log_sum -inf.
template <class T>
void logsumexp_rows(const T* x, T* max, T* log_sum, std::size_t rows, std::size_t n);

}  // namespace xgrad::kernels
