#pragma once
// The passes around linear's product y = x W^T + b over [rows, out] matrices, on the
// pool: the bias written into y's rows (the product then adds into them), relu fused in,
// and the bias gradient. Each element is written on its own and the column sums are taken
// in fixed chunks of rows added in order, so the bits do not depend on the thread count.

#include <cstddef>
#include <functional>

#include "xgrad/autograd/bfloat16.hpp"

namespace xgrad::kernels {

// Every row of y = bias, or zeros when bias is null.
template <class T>
void fill_rows(T* y, const T* bias, std::size_t rows, std::size_t out);

// relu over a block of y (rows x cols from y, row stride ld) on the calling thread: a
// product's epilogue (gemm.hpp). With `rounded` (float only; the same row stride), each
// result is also rounded to bf16 there, for a bf16 product that reads y next.
template <class T>
void relu_block(T* y, std::size_t ld, std::size_t rows, std::size_t cols, bfloat16* rounded = nullptr);

// masked = g where relu's output y is positive, else 0, over n elements on the calling
// thread. y > 0 exactly where relu's input was (NaN and -0 included), so the same bits as
// relu's own backward.
template <class T>
void relu_gradient_n(const T* g, const T* y, std::size_t n, T* masked);

// db += the column sums of g (the bias gradient).
template <class T>
void add_column_sums(const T* g, std::size_t rows, std::size_t out, T* db);

// A fused activation's gradient of linear's dY for rows [first, last), into dh (those
// rows, row after row).
using RowsGradient = std::function<void(std::size_t first, std::size_t last, float* dh)>;

// linear's dY (or, with `through`, the activation's gradient of it) rounded to bf16 into
// `rounded` for the backward products, and its column sums added into db (when not null)
// in the same pass over dY, a chunk of rows at a time, with add_column_sums's bits.
void round_with_column_sums(const float* g, std::size_t rows, std::size_t out, float* db, bfloat16* rounded,
                            const RowsGradient* through);

}  // namespace xgrad::kernels
