#pragma once
// The tokenizer's table of ranks: byte strings to their index, by open addressing. The
// keys live end to end in one buffer and the slots hold only a 32-bit tag of the hash and
// the key's index, so a lookup is a hash, a slot or two and one comparison, with no
// allocation. Internal to the text layer (and its tests).

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace xgrad::text::detail {

// A 64-bit hash of a byte string, 8 bytes at a time (MurmurHash3's finalizer at the end).
inline std::uint64_t hash_bytes(std::string_view bytes) noexcept {
  constexpr std::uint64_t kMultiplier = 0x9E3779B97F4A7C15ull;
  std::uint64_t h = bytes.size() * kMultiplier;
  const char* p = bytes.data();
  std::size_t n = bytes.size();
  for (; n >= 8; p += 8, n -= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    h = (h ^ word) * kMultiplier;
    h ^= h >> 29;
  }
  if (n) {
    std::uint64_t word = 0;
    std::memcpy(&word, p, n);
    h = (h ^ word) * kMultiplier;
    h ^= h >> 29;
  }
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ull;
  h ^= h >> 33;
  return h;
}

class ByteStringMap {
 public:
  static constexpr std::uint32_t kAbsent = UINT32_MAX;

  // Room for `capacity` keys, the table at most half full.
  explicit ByteStringMap(std::size_t capacity) {
    std::size_t slots = 16;
    while (slots < 2 * capacity) slots *= 2;
    slots_.assign(slots, Slot{0, kAbsent});
    mask_ = slots - 1;
    offsets_.reserve(capacity + 1);
    offsets_.push_back(0);
  }

  // Adds `key` as index size(); when an equal key is there already, adds nothing and
  // returns that key's index, else kAbsent. At most `capacity` keys.
  std::uint32_t add(std::string_view key) {
    const std::uint64_t h = hash_bytes(key);
    std::size_t slot = h & mask_;
    for (;; slot = (slot + 1) & mask_) {
      if (slots_[slot].index == kAbsent) break;
      if (slots_[slot].tag == tag(h) && this->key(slots_[slot].index) == key) return slots_[slot].index;
    }
    slots_[slot] = Slot{tag(h), static_cast<std::uint32_t>(size())};
    keys_.append(key);
    offsets_.push_back(static_cast<std::uint32_t>(keys_.size()));
    return kAbsent;
  }

  // The index of `key`, or kAbsent.
  std::uint32_t find(std::string_view key) const noexcept {
    const std::uint64_t h = hash_bytes(key);
    for (std::size_t slot = h & mask_;; slot = (slot + 1) & mask_) {
      const Slot s = slots_[slot];
      if (s.index == kAbsent) return kAbsent;
      if (s.tag == tag(h) && this->key(s.index) == key) return s.index;
    }
  }

  std::string_view key(std::uint32_t index) const noexcept {
    return std::string_view(keys_).substr(offsets_[index], offsets_[index + 1] - offsets_[index]);
  }
  std::size_t size() const noexcept { return offsets_.size() - 1; }

 private:
  struct Slot {
    std::uint32_t tag;
    std::uint32_t index;
  };
  static std::uint32_t tag(std::uint64_t hash) noexcept { return static_cast<std::uint32_t>(hash >> 32); }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::string keys_;
  std::vector<std::uint32_t> offsets_;  // key i is keys_[offsets_[i], offsets_[i + 1])
};

}  // namespace xgrad::text::detail
