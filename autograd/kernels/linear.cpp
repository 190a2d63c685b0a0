#include "xgrad/autograd/kernels/linear.hpp"

#include <algorithm>
#include <array>
#include <type_traits>

#include "xgrad/autograd/parallel.hpp"

namespace xgrad::kernels {

namespace {

// The pointwise passes run on the pool in pieces of about this many elements (whole rows
// for the bias fill), the size they were timed at (speed only, never bits); the bias
// gradient in pieces of this many columns (a multiple of a cache line).
constexpr std::size_t kChunkElements = 2 * kElementsPerChunk;
constexpr std::size_t kBiasColumns = 64;
// Cost estimate per element of a column sum (a strided read and an add), for the pool.
constexpr double kColumnSumWork = 4;

std::size_t rows_per_chunk(std::size_t width) {
  return std::max<std::size_t>(1, kChunkElements / std::max<std::size_t>(1, width));
}

// Walks columns [begin, end) of a rows x out matrix row by row, calling element(r, o) on
// each, and adds the values it returns into db's columns (when db is given) in that order:
// each column is summed whole by one thread, row by row, so the bits do not depend on the
// thread count. The running sums live in registers for a full block of columns.
template <class T, class Element>
void walk_columns(std::size_t rows, std::size_t begin, std::size_t end, T* db, Element&& element) {
  const auto walk = [&](auto width) {
    std::array<T, kBiasColumns> sums{};
    if (db) std::copy_n(db + begin, width, sums.begin());
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t o = 0; o < width; ++o) sums[o] += element(r, begin + o);
    if (db) std::copy_n(sums.begin(), width, db + begin);
  };
  if (end - begin == kBiasColumns)
    walk(std::integral_constant<std::size_t, kBiasColumns>{});  // a fixed width unrolls into registers
  else
    walk(end - begin);
}

template <class T>
T relu_gradient_of(T g, T y) {
  return y > T(0) ? g : T(0);
}

}  // namespace

template <class T>
void fill_rows(T* y, const T* bias, std::size_t rows, std::size_t out) {
  parallel_for_chunks(rows, rows_per_chunk(out), static_cast<double>(out), [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r)
      bias ? std::copy_n(bias, out, y + r * out) : std::fill_n(y + r * out, out, T(0));
  });
}

template <class T>
void relu_in_place(T* y, std::size_t n) {
  parallel_for_chunks(n, kChunkElements, 1.0, [y](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) y[i] = y[i] < T(0) ? T(0) : y[i];  // NaN stays NaN, as relu()
  });
}

template <class T>
void relu_gradient(const T* g, const T* y, std::size_t n, T* masked) {
  parallel_for_chunks(n, kChunkElements, 1.0, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) masked[i] = relu_gradient_of(g[i], y[i]);
  });
}

template <class T>
void add_column_sums(const T* g, std::size_t rows, std::size_t out, T* db) {
  parallel_for_chunks(
      out, kBiasColumns, kColumnSumWork * static_cast<double>(rows), [&](std::size_t begin, std::size_t end) {
        walk_columns(rows, begin, end, db, [g, out](std::size_t r, std::size_t o) { return g[r * out + o]; });
      });
}

void round_with_column_sums(const float* g, const float* relu_output, std::size_t rows, std::size_t out, float* db,
                            bfloat16* rounded) {
  parallel_for_chunks(
      out, kBiasColumns, kColumnSumWork * static_cast<double>(rows), [&](std::size_t begin, std::size_t end) {
        const auto round = [&](std::size_t r, std::size_t o, float v) {
          rounded[r * out + o] = to_bfloat16(v);
          return v;
        };
        if (relu_output)
          walk_columns(rows, begin, end, db, [&](std::size_t r, std::size_t o) {
            return round(r, o, relu_gradient_of(g[r * out + o], relu_output[r * out + o]));
          });
        else
          walk_columns(rows, begin, end, db, [&](std::size_t r, std::size_t o) { return round(r, o, g[r * out + o]); });
      });
}

template void fill_rows<float>(float*, const float*, std::size_t, std::size_t);
template void fill_rows<double>(double*, const double*, std::size_t, std::size_t);
template void relu_in_place<float>(float*, std::size_t);
template void relu_in_place<double>(double*, std::size_t);
template void relu_gradient<float>(const float*, const float*, std::size_t, float*);
template void relu_gradient<double>(const double*, const double*, std::size_t, double*);
template void add_column_sums<float>(const float*, std::size_t, std::size_t, float*);
template void add_column_sums<double>(const double*, std::size_t, std::size_t, double*);

}  // namespace xgrad::kernels
