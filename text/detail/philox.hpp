#pragma once
// Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1,
// 2, 3", SC 2011; the generator of Random123, cuRAND and JAX): a counter-based generator,
// 128 random bits from a 64-bit key and a 128-bit counter, with no state between calls.
// What the loader draws windows from, keyed by the seed and counting by (step, row).
// Internal to the text layer (and its tests, which check Random123's known answers).

#include <array>
#include <cstdint>

namespace xgrad::text::detail {

using PhiloxBlock = std::array<std::uint32_t, 4>;

inline PhiloxBlock philox4x32_10(PhiloxBlock counter, std::array<std::uint32_t, 2> key) noexcept {
  constexpr std::uint32_t kMultiplier0 = 0xD2511F53, kMultiplier1 = 0xCD9E8D57;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;  // the key's increments per round
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t product0 = std::uint64_t{kMultiplier0} * counter[0];
    const std::uint64_t product1 = std::uint64_t{kMultiplier1} * counter[2];
    counter = {static_cast<std::uint32_t>(product1 >> 32) ^ counter[1] ^ key[0], static_cast<std::uint32_t>(product1),
               static_cast<std::uint32_t>(product0 >> 32) ^ counter[3] ^ key[1], static_cast<std::uint32_t>(product0)};
    key = {key[0] + kWeyl0, key[1] + kWeyl1};
  }
  return counter;
}

}  // namespace xgrad::text::detail
