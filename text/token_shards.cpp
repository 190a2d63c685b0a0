#include "xgrad/text/token_shards.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/files.hpp"
#include "xgrad/autograd/parallel.hpp"

namespace xgrad::text {

// Tokens are read straight from the map: little-endian, as the format is.
static_assert(std::endian::native == std::endian::little, "token shards are read on little-endian machines");

namespace {

constexpr std::int32_t kGpt2Magic = 20240520, kGpt2Version = 1;
constexpr std::int32_t kLlama3Magic = 20240801, kLlama3Version = 7;
constexpr std::size_t kWriteBuffer = std::size_t{1} << 20;

// What the shard's own checks start with; the file's (open, map, write) name the path themselves.
std::string op_for(const std::string& path) { return str("token shard '", path, "'"); }
constexpr const char* kFileOp = "token shard";

void put_le32(unsigned char* out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<unsigned char>(value >> (8 * i));
}

std::uint32_t get_le32(const unsigned char* in) {
  std::uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= std::uint32_t{in[i]} << (8 * i);
  return value;
}

}  // namespace

ShardFormat shard_format_for(std::size_t vocabulary_size) noexcept {
  return vocabulary_size <= 65536 ? ShardFormat::gpt2 : ShardFormat::llama3;
}

std::size_t token_width(ShardFormat format) noexcept { return format == ShardFormat::gpt2 ? 2 : 4; }

std::string describe(ShardFormat format) {
  return format == ShardFormat::gpt2 ? "gpt2 (magic 20240520, version 1, uint16 tokens)"
                                     : "llama3 (magic 20240801, version 7, uint32 tokens)";
}

ShardWriter::ShardWriter(const std::string& path, std::size_t vocabulary_size)
    : ShardWriter(path, vocabulary_size, shard_format_for(vocabulary_size)) {}

namespace {

// `path`, once the vocabulary is found to fit the format: checked before any file is made.
const std::string& fitting(const std::string& path, std::size_t vocabulary_size, ShardFormat format) {
  XGRAD_CHECK(vocabulary_size >= 1, op_for(path), "the vocabulary size is 0");
  XGRAD_CHECK(format == ShardFormat::llama3 || vocabulary_size <= 65536, op_for(path), "a vocabulary of ",
              vocabulary_size, " tokens does not fit ", describe(format), ": ids past 65535 need ",
              describe(ShardFormat::llama3));
  return path;
}

}  // namespace

ShardWriter::ShardWriter(const std::string& path, std::size_t vocabulary_size, ShardFormat format)
    : file_(fitting(path, vocabulary_size, format), kFileOp), vocabulary_size_(vocabulary_size), format_(format) {
  file_.write(std::string(kShardHeaderBytes, '\0'));  // the real header at commit()
  buffer_.reserve(kWriteBuffer);
}

void ShardWriter::write(std::span<const TokenId> tokens) {
  const std::string op = op_for(file_.path());
  XGRAD_CHECK(!failed_, op, "write() after a refused write: the shard will not be made");
  failed_ = true;  // until the tokens are taken
  const auto past = std::find_if(tokens.begin(), tokens.end(), [&](TokenId id) { return id >= vocabulary_size_; });
  XGRAD_CHECK(past == tokens.end(), op, "token ", *past, " at position ", tokens_ + (past - tokens.begin()),
              " is past the vocabulary, whose size is ", vocabulary_size_);
  XGRAD_CHECK(tokens.size() <= kMaxShardTokens - tokens_, op, "writing ", tokens.size(), " tokens after ", tokens_,
              " passes the ", kMaxShardTokens, " a shard holds (its count is an int32)");
  const std::size_t width = token_width(format_);
  for (const TokenId id : tokens) {
    if (buffer_.size() + width > kWriteBuffer) flush();
    for (std::size_t i = 0; i < width; ++i) buffer_ += static_cast<char>(id >> (8 * i));
  }
  tokens_ += tokens.size();
  failed_ = false;
}

void ShardWriter::flush() {
  file_.write(buffer_);
  buffer_.clear();
}

void ShardWriter::commit() {
  const std::string op = op_for(file_.path());
  XGRAD_CHECK(!failed_, op, "commit() after a refused write: the shard will not be made");
  XGRAD_CHECK(tokens_ > 0, op, "holds no tokens (llm.c's loader refuses an empty shard)");
  flush();
  unsigned char header[12];
  const bool gpt2 = format_ == ShardFormat::gpt2;
  put_le32(header, gpt2 ? kGpt2Magic : kLlama3Magic);
  put_le32(header + 4, gpt2 ? kGpt2Version : kLlama3Version);
  put_le32(header + 8, static_cast<std::uint32_t>(tokens_));
  file_.write_at(0, std::string_view(reinterpret_cast<const char*>(header), sizeof header));
  file_.commit();
}

namespace {

// The format a header names, or an Error naming what it holds.
ShardFormat read_header(const std::string& op, const unsigned char* header) {
  const auto magic = static_cast<std::int32_t>(get_le32(header));
  const auto version = static_cast<std::int32_t>(get_le32(header + 4));
  XGRAD_CHECK(magic == kGpt2Magic || magic == kLlama3Magic, op, "the magic number is ", magic, ", not ", kGpt2Magic,
              " (llm.c's GPT-2 shards) or ", kLlama3Magic, " (its Llama 3 shards): not a token shard");
  const ShardFormat format = magic == kGpt2Magic ? ShardFormat::gpt2 : ShardFormat::llama3;
  const std::int32_t expected = magic == kGpt2Magic ? kGpt2Version : kLlama3Version;
  XGRAD_CHECK(version == expected, op, "the version is ", version, ", and magic ", magic, " goes with version ",
              expected);
  return format;
}

}  // namespace

TokenShard::TokenShard(const std::string& path, std::size_t vocabulary_size) : file_(path, kFileOp) {
  const std::string op = op_for(path);
  const std::string_view bytes = file_.bytes();
  XGRAD_CHECK(bytes.size() >= kShardHeaderBytes, op, "the file is ", bytes.size(), " bytes, shorter than the ",
              kShardHeaderBytes, "-byte header (256 int32)");
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  format_ = read_header(op, data);
  const auto count = static_cast<std::int32_t>(get_le32(data + 8));
  XGRAD_CHECK(count > 0, op, "the header's token count is ", count, ": a shard holds at least one token");
  const std::size_t width = token_width(format_);
  const std::size_t expected = kShardHeaderBytes + static_cast<std::size_t>(count) * width;
  XGRAD_CHECK(bytes.size() == expected, op, "the file is ", bytes.size(), " bytes, but its header's ", count,
              " tokens of ", width, " bytes make ", expected, " (", kShardHeaderBytes, " + ", count, " x ", width,
              "): ",
              bytes.size() < expected ? str(expected - bytes.size(), " bytes are missing (a file cut short?)")
                                      : str(bytes.size() - expected, " bytes follow the tokens"));
  size_ = static_cast<std::size_t>(count);
  tokens_ = data + kShardHeaderBytes;

  // The first token past the vocabulary: the first of each fixed chunk's, chunks in parallel.
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  std::vector<std::size_t> first_past((size_ + kChunk - 1) / kChunk, size_);
  parallel_for_chunks(size_, kChunk, 1.0, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i)
      if (at(i) >= vocabulary_size) {
        first_past[begin / kChunk] = i;
        return;
      }
  });
  const auto past = std::find_if(first_past.begin(), first_past.end(), [&](std::size_t i) { return i < size_; });
  XGRAD_CHECK(past == first_past.end(), op, "token ", at(*past), " at position ", *past, " (of ", size_,
              ") is past the vocabulary, whose size is ", vocabulary_size);
}

TokenId TokenShard::at(std::size_t i) const noexcept {
  if (format_ == ShardFormat::gpt2) {
    std::uint16_t id;
    std::memcpy(&id, tokens_ + 2 * i, 2);
    return id;
  }
  std::uint32_t id;
  std::memcpy(&id, tokens_ + 4 * i, 4);
  return id;
}

void TokenShard::read(std::size_t begin, std::span<std::int64_t> out) const {
  XGRAD_CHECK(begin <= size_ && out.size() <= size_ - begin, op_for(path()), "tokens ", begin, " to ",
              begin + out.size(), " pass the end of the shard's ", size_);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = at(begin + i);
}

std::uint64_t TokenShard::fingerprint() const { return xgrad::fingerprint(file_.bytes()); }

}  // namespace xgrad::text
