#pragma once
// GGUF's container, as ggml's docs/gguf.md defines version 3: what any model's file is made
// of, before models/gguf.cpp decides what a GPT-2 or a Llama puts in it.
//
//   "GGUF", version (u32 3), tensor count (u64), metadata count (u64)
//   metadata: key (string), value type (u32), value
//   tensor infos: name (string), dimension count (u32), dimensions (u64 each, the fastest
//                 varying first: ggml's ne0 is a row's length), type (u32), offset (u64,
//                 from the start of the data, a multiple of the alignment)
//   padding to the alignment (32, general.alignment's default), then the tensors' data,
//   each padded to the alignment
// A string is its length (u64) and its bytes, no terminator; everything little-endian.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace xgrad {
class AtomicFileWriter;
}

namespace xgrad::models::gguf {

inline constexpr std::uint32_t kVersion = 3;
inline constexpr std::uint64_t kAlignment = 32;

// ggml's tensor types used here, with their numbers in the file.
enum class TensorType : std::uint32_t { f32 = 0, f16 = 1, q8_0 = 8, bf16 = 30 };

// Q8_0: blocks of 32 values, each an fp16 scale d = max|x| / 127 and 32 int8 q = round(x / d)
// (halves away from zero), 34 bytes; a row must be a whole number of blocks.
inline constexpr std::size_t kQ8Block = 32;

// One metadata value: the types a model's file needs.
using Value = std::variant<std::uint32_t, std::int32_t, float, bool, std::string, std::vector<std::string>,
                           std::vector<std::int32_t>>;

// A tensor's bytes in `type`, from float32 values laid out row after row (`row_length`
// values each): F32 as is, F16 and BF16 rounded to nearest (ties to even), Q8_0 as above.
std::string encode_tensor(TensorType type, std::span<const float> values, std::size_t row_length);

// IEEE binary16, rounded to nearest, ties to even (values past its range become infinity).
std::uint16_t to_half(float x);

class File {
 public:
  // Keys are kept in the order given (a file's bytes depend only on what was added).
  void add(std::string key, Value value);
  // dims: ggml's order (a row's length first); `data` as encode_tensor gives it.
  void add_tensor(std::string name, std::vector<std::uint64_t> dims, TensorType type, std::string data);

  // Writes the whole file (the caller commits it).
  void write(AtomicFileWriter& out) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<std::uint64_t> dims;
    TensorType type;
    std::string data;
  };
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace xgrad::models::gguf
