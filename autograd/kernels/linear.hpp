#pragma once
// The passes around linear's product y = x W^T + b over [rows, out] matrices, on the
// pool: the bias written into y's rows (the product then adds into them), relu fused in,
// and the bias gradient. Each element is written on its own and the column sums are taken
// in fixed chunks of rows added in order, so the bits do not depend on the thread count.

#include <cstddef>

#include "xgrad/autograd/bfloat16.hpp"

namespace xgrad::kernels {

// Every row of y = bias, or zeros when bias is null.
template <class T>
void fill_rows(T* y, const T* bias, std::size_t rows, std::size_t out);

// y = relu(y) over n elements; NaN stays NaN, as relu().
template <class T>
void relu_in_place(T* y, std::size_t n);

// masked = g where relu's output y is positive, else 0. y > 0 exactly where relu's input
// was (NaN and -0 included), so the same bits as relu's own backward.
template <class T>
void relu_gradient(const T* g, const T* y, std::size_t n, T* masked);

// db += the column sums of g (the bias gradient).
template <class T>
void add_column_sums(const T* g, std::size_t rows, std::size_t out, T* db);

// linear's dY (relu's gradient of it when relu_output is given) rounded to bf16 into
// `rounded` for the backward products, and its column sums added into db (when not null)
// in the same pass over dY, with add_column_sums's bits.
void round_with_column_sums(const float* g, const float* relu_output, std::size_t rows, std::size_t out, float* db,
                            bfloat16* rounded);

}  // namespace xgrad::kernels
