#include "xgrad/autograd/kernels/linear.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <type_traits>
#include <vector>

#include "xgrad/autograd/parallel.hpp"

namespace xgrad::kernels {

namespace {

// The pointwise passes run on the pool in pieces of about this many elements (whole rows
// for the bias fill), the size they were timed at (speed only, never bits).
constexpr std::size_t kChunkElements = 2 * kElementsPerChunk;
// The bias gradient sums rows in chunks of this many, each chunk's column sums apart, then
// adds them in chunk order: a fixed cut, so the bits do not depend on the thread count.
constexpr std::size_t kSumRows = 32;
constexpr std::size_t kSumColumns = 64;  // a chunk's running sums for this many columns fit in registers
// Cost estimate per element of a column sum (a read and an add), for the pool.
constexpr double kColumnSumWork = 4;

std::size_t rows_per_chunk(std::size_t width) {
  return std::max<std::size_t>(1, kChunkElements / std::max<std::size_t>(1, width));
}

// Walks a rows x out matrix in chunks of kSumRows rows on the pool. On each chunk's
// thread, chunk_rows(first, last, scratch) gives the chunk's rows, row after row: the
// matrix's own, or made into `scratch` (room for them, allocated for the chunk when
// with_scratch); their column sums are added into db (when given): each chunk's sums (from
// zero, row by row) then added into db in chunk order; and chunk_done(first, last, rows)
// follows, while they are in cache.
// Cut by rows, each core reads the rows the op before it wrote there (the pool's home
// ranges), in its L2; cut by columns, each core read half of every row from the other's
// cache, and a narrow block stepped a row's length from read to read: medium's bf16 step
// spent 11% of its time there (Xeon, AMX).
template <class T, class ChunkRows, class ChunkDone>
void walk_rows(std::size_t rows, std::size_t out, T* db, bool with_scratch, ChunkRows&& chunk_rows,
               ChunkDone&& chunk_done) {
  const std::size_t chunks = (rows + kSumRows - 1) / kSumRows;
  std::vector<T> partial(db ? chunks * out : 0);
  parallel_for(chunks, kColumnSumWork * static_cast<double>(kSumRows * out), [&](std::size_t c) {
    const std::size_t first = c * kSumRows, last = std::min(rows, first + kSumRows);
    const std::unique_ptr<T[]> scratch(with_scratch ? new T[(last - first) * out] : nullptr);  // not zeroed
    const T* values = chunk_rows(first, last, scratch.get());
    // A block of columns at a time over the chunk's rows, its sums in registers.
    const auto block = [&](std::size_t begin, auto width) {
      std::array<T, kSumColumns> sums{};
      for (std::size_t r = 0; r < last - first; ++r)
        for (std::size_t o = 0; o < width; ++o) sums[o] += values[r * out + begin + o];
      if (db) std::copy_n(sums.begin(), width, partial.data() + c * out + begin);
    };
    std::size_t begin = 0;
    for (; begin + kSumColumns <= out; begin += kSumColumns)
      block(begin, std::integral_constant<std::size_t, kSumColumns>{});  // a fixed width unrolls
    if (begin < out) block(begin, out - begin);
    chunk_done(first, last, values);
  });
  if (!db) return;
  // The chunks' sums added in double, rounded once: in float, 2^24 rows of 0.1 came out
  // 0.4% high (as every other sum of xgrad's, docs/ops.md).
  std::vector<double> total(db, db + out);
  for (std::size_t c = 0; c < chunks; ++c)
    for (std::size_t o = 0; o < out; ++o) total[o] += partial[c * out + o];
  std::copy(total.begin(), total.end(), db);
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
void relu_block(T* y, std::size_t ld, std::size_t rows, std::size_t cols, bfloat16* rounded) {
  for (std::size_t r = 0; r < rows; ++r) {
    T* row = y + r * ld;
    for (std::size_t c = 0; c < cols; ++c) row[c] = row[c] < T(0) ? T(0) : row[c];  // NaN stays NaN, as relu()
    if constexpr (std::is_same_v<T, float>)
      if (rounded) to_bfloat16_n(row, cols, rounded + r * ld);
  }
}

template <class T>
void relu_gradient_n(const T* g, const T* y, std::size_t n, T* masked) {
  for (std::size_t i = 0; i < n; ++i) masked[i] = relu_gradient_of(g[i], y[i]);
}

template <class T>
void add_column_sums(const T* g, std::size_t rows, std::size_t out, T* db) {
  walk_rows(
      rows, out, db, false, [g, out](std::size_t first, std::size_t, T*) { return g + first * out; },
      [](std::size_t, std::size_t, const T*) {});
}

void round_with_column_sums(const float* g, std::size_t rows, std::size_t out, float* db, bfloat16* rounded,
                            const RowsGradient* through) {
  // Each chunk's rows rounded after its sums while in cache, whole rows at a time by
  // to_bfloat16_n (element by element inside the walk, the rounding ran at the emulation's
  // rate): lm's bf16 step 1.6% faster. Through an activation, its gradient of the chunk's
  // rows is made first into the chunk's scratch, which the sums and the rounding read.
  walk_rows(
      rows, out, db, through != nullptr,
      [&](std::size_t first, std::size_t last, float* scratch) -> const float* {
        if (!through) return g + first * out;
        (*through)(first, last, scratch);
        return scratch;
      },
      [&](std::size_t first, std::size_t last, const float* values) {
        to_bfloat16_n(values, (last - first) * out, rounded + first * out);
      });
}

template void fill_rows<float>(float*, const float*, std::size_t, std::size_t);
template void fill_rows<double>(double*, const double*, std::size_t, std::size_t);
template void relu_block<float>(float*, std::size_t, std::size_t, std::size_t, bfloat16*);
template void relu_block<double>(double*, std::size_t, std::size_t, std::size_t, bfloat16*);
template void relu_gradient_n<float>(const float*, const float*, std::size_t, float*);
template void relu_gradient_n<double>(const double*, const double*, std::size_t, double*);
template void add_column_sums<float>(const float*, std::size_t, std::size_t, float*);
template void add_column_sums<double>(const double*, std::size_t, std::size_t, double*);

}  // namespace xgrad::kernels
