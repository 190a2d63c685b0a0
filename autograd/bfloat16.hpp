#pragma once
// bfloat16: the top 16 bits of a float32 (sign, the same 8-bit exponent, 7 stored
// mantissa bits: 8 significant bits, a relative rounding error of at most 2^-8). xgrad
// stores it only as the operands of mixed-precision matrix products (autograd/precision.hpp,
// autograd/gemm.hpp).

#include <bit>
#include <cstddef>
#include <cstdint>

namespace xgrad {

struct bfloat16 {
  std::uint16_t bits;
};

// Round to nearest, ties to even, as vcvtneps2bf16 does; a NaN stays a (quiet) NaN of the
// same sign, and values past bfloat16's largest round to infinity. Denormals are kept.
// Written without a branch, so that loops over arrays of it vectorize.
inline bfloat16 to_bfloat16(float x) {
  const auto u = std::bit_cast<std::uint32_t>(x);
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  return {static_cast<std::uint16_t>((nan ? u | 0x00400000u : u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}

inline float to_float(bfloat16 x) { return std::bit_cast<float>(static_cast<std::uint32_t>(x.bits) << 16); }

// How to_bfloat16_n writes: through the caches, or streamed to memory past them, for a
// rounding read long after (an optimizer's refresh of every weight's rounding, which the
// next forward reads only after the whole step has gone through memory): no line is read
// before it is written.
enum class Bf16Store { cached, streamed };

// out[i] = to_bfloat16(in[i]) for i < n, the same bits. Where the library is built for
// AVX512_BF16, 32 at a time by vcvtne2ps2bf16 (which rounds alike but flushes denormals:
// a batch holding one is rounded element by element).
void to_bfloat16_n(const float* in, std::size_t n, bfloat16* out, Bf16Store store = Bf16Store::cached);

// out[r * cols + c] = to_bfloat16(in[r * ld + c]) for a rows x cols block stored with row
// stride ld: an operand made dense and rounded once, then used by every panel of a product.
void round_to_bfloat16(const float* in, std::size_t rows, std::size_t cols, std::size_t ld, bfloat16* out);

}  // namespace xgrad
