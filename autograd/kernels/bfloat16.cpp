#include "xgrad/autograd/bfloat16.hpp"

#include <algorithm>

#include "xgrad/autograd/parallel.hpp"

namespace xgrad {

namespace {
// The pool's pointwise chunk: lm's 768 x 128 roundings are six pieces for two threads, not
// three (speed only, never bits).
constexpr std::size_t kChunkElements = kElementsPerChunk;
// The pool's cost estimate per element, as for a pointwise op: rounding a weight matrix of
// 64K elements is worth both threads (at 1 per element it ran alone, the other waiting).
constexpr double kWorkPerElement = 8;
}  // namespace

void round_to_bfloat16(const float* in, std::size_t rows, std::size_t cols, std::size_t ld, bfloat16* out) {
  if (rows == 0 || cols == 0) return;
  const std::size_t rows_per_chunk = std::max<std::size_t>(1, kChunkElements / cols);
  parallel_for_chunks(rows, rows_per_chunk, kWorkPerElement * static_cast<double>(cols),
                      [&](std::size_t begin, std::size_t end) {
                        for (std::size_t r = begin; r < end; ++r)
                          for (std::size_t c = 0; c < cols; ++c) out[r * cols + c] = to_bfloat16(in[r * ld + c]);
                      });
}

}  // namespace xgrad
