#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "xgrad/autograd/bfloat16.hpp"
#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/files.hpp"
#include "xgrad/models/detail/gguf_file.hpp"

namespace xgrad::models::gguf {
namespace {

static_assert(std::endian::native == std::endian::little, "GGUF is written little-endian, as this machine stores");

// The value types' numbers in the file (docs/gguf.md's gguf_metadata_value_type).
enum class ValueType : std::uint32_t { uint32 = 4, int32 = 5, float32 = 6, boolean = 7, string = 8, array = 9 };

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

void put_string(std::string& out, std::string_view text) {
  put<std::uint64_t>(out, text.size());
  out.append(text);
}

void put_type(std::string& out, ValueType type) { put<std::uint32_t>(out, static_cast<std::uint32_t>(type)); }

// A value: its type, then its bytes (an array: the items' type, their count, the items).
struct PutValue {
  std::string& out;
  void operator()(std::uint32_t v) const { put_type(out, ValueType::uint32), put(out, v); }
  void operator()(std::int32_t v) const { put_type(out, ValueType::int32), put(out, v); }
  void operator()(float v) const { put_type(out, ValueType::float32), put(out, v); }
  void operator()(bool v) const { put_type(out, ValueType::boolean), put<std::uint8_t>(out, v ? 1 : 0); }
  void operator()(const std::string& v) const { put_type(out, ValueType::string), put_string(out, v); }
  void operator()(const std::vector<std::string>& items) const {
    put_type(out, ValueType::array), put_type(out, ValueType::string), put<std::uint64_t>(out, items.size());
    for (const std::string& item : items) put_string(out, item);
  }
  void operator()(const std::vector<std::int32_t>& items) const {
    put_type(out, ValueType::array), put_type(out, ValueType::int32), put<std::uint64_t>(out, items.size());
    for (const std::int32_t item : items) put(out, item);
  }
};

std::uint64_t padded(std::uint64_t size) { return (size + kAlignment - 1) / kAlignment * kAlignment; }

std::string q8_0(std::span<const float> values) {
  std::string out;
  out.reserve(values.size() / kQ8Block * (sizeof(std::uint16_t) + kQ8Block));
  for (std::size_t start = 0; start < values.size(); start += kQ8Block) {
    const auto block = values.subspan(start, kQ8Block);
    float largest = 0;
    for (const float x : block) largest = std::max(largest, std::fabs(x));
    // The values are divided by the scale before it is rounded to fp16, as ggml's
    // reference quantizer does; llama.cpp multiplies by the rounded one.
    const float scale = largest / 127;
    const float inverse = scale != 0 ? 1 / scale : 0;
    put(out, to_half(scale));
    for (const float x : block) put(out, static_cast<std::int8_t>(std::round(x * inverse)));
  }
  return out;
}

}  // namespace

std::uint16_t to_half(float x) { return std::bit_cast<std::uint16_t>(static_cast<_Float16>(x)); }

std::string encode_tensor(TensorType type, std::span<const float> values, std::size_t row_length) {
  XGRAD_CHECK(row_length > 0 && values.size() % row_length == 0, "gguf", "rows of ", row_length, " values over ",
              values.size(), " values");
  std::string out;
  switch (type) {
    case TensorType::f32:
      out.assign(reinterpret_cast<const char*>(values.data()), values.size_bytes());
      break;
    case TensorType::f16:
      out.reserve(2 * values.size());
      for (const float x : values) put(out, to_half(x));
      break;
    case TensorType::bf16:
      out.reserve(2 * values.size());
      for (const float x : values) put(out, to_bfloat16(x).bits);
      break;
    case TensorType::q8_0:
      XGRAD_CHECK(row_length % kQ8Block == 0, "gguf", "Q8_0 takes rows of whole ", kQ8Block,
                  "-value blocks, not rows of ", row_length);
      out = q8_0(values);
      break;
  }
  return out;
}

void File::add(std::string key, Value value) { metadata_.emplace_back(std::move(key), std::move(value)); }

void File::add_tensor(std::string name, std::vector<std::uint64_t> dims, TensorType type, std::string data) {
  tensors_.push_back({std::move(name), std::move(dims), type, std::move(data)});
}

void File::write(AtomicFileWriter& out) const {
  std::string head;
  head.append("GGUF");
  put<std::uint32_t>(head, kVersion);
  put<std::uint64_t>(head, tensors_.size());
  put<std::uint64_t>(head, metadata_.size());
  for (const auto& [key, value] : metadata_) {
    put_string(head, key);
    std::visit(PutValue{head}, value);
  }
  std::uint64_t offset = 0;
  for (const Tensor& tensor : tensors_) {
    put_string(head, tensor.name);
    put<std::uint32_t>(head, static_cast<std::uint32_t>(tensor.dims.size()));
    for (const std::uint64_t dim : tensor.dims) put(head, dim);
    put<std::uint32_t>(head, static_cast<std::uint32_t>(tensor.type));
    put(head, offset);
    offset += padded(tensor.data.size());
  }
  head.resize(padded(head.size()), '\0');
  out.write(head);
  const std::string zeros(kAlignment, '\0');
  for (const Tensor& tensor : tensors_) {
    out.write(tensor.data);
    out.write(std::string_view(zeros).substr(0, padded(tensor.data.size()) - tensor.data.size()));
  }
}

}  // namespace xgrad::models::gguf
