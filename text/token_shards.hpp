#pragma once
// Token shards in llm.c's format (dev/data/data_common.py's write_datafile; its loader,
// llmc/dataloader.h, reads them): a header of 256 little-endian int32, then the tokens.
//
//   header[0]  magic      20240520 (llm.c's "gpt-2" layout)   20240801 ("llama-3" layout)
//   header[1]  version    1                                   7
//   header[2]  the number of tokens that follow, at least 1 and below 2^31
//   header[3..255]  0
//   tokens     uint16 little-endian                          uint32 little-endian
//
// Both layouts are llm.c's own; xgrad reads and writes both, choosing the GPT-2 one for
// vocabularies of at most 65,536 tokens (ids that fit 16 bits) and the Llama 3 one past
// that. nanoGPT's train.bin (uint16 tokens with no header) is another format.
//
// ShardWriter streams tokens to a shard that appears whole or not at all (an
// AtomicFileWriter, autograd/files.hpp). TokenShard maps one read-only (MappedFile) and
// checks it whole before use. Every problem is an xgrad::Error that starts with
// "token shard" and names the file ("token shard 'PATH': ..." for what is in it) and the
// numbers: the size, the magic, the version, the count, the first token past the
// vocabulary and its position.
//
// Example:
//   ShardWriter writer("train.bin", tokenizer.vocabulary_size());
//   writer.write(tokenizer.encode_ordinary(text));
//   writer.commit();                                      // now train.bin exists, whole
//   const TokenShard shard("train.bin", tokenizer.vocabulary_size());
//   TokenId first = shard.at(0);

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "xgrad/autograd/files.hpp"
#include "xgrad/text/tokenizer.hpp"

namespace xgrad::text {

enum class ShardFormat {
  gpt2,    // magic 20240520, version 1, uint16 tokens
  llama3,  // magic 20240801, version 7, uint32 tokens
};

inline constexpr std::size_t kShardHeaderBytes = 256 * 4;
// The most tokens a shard holds: its count is an int32 (llm.c writes fewer than 2^31).
inline constexpr std::uint64_t kMaxShardTokens = (std::uint64_t{1} << 31) - 1;

// The format xgrad writes for a vocabulary: gpt2 up to 65,536 tokens, llama3 past that.
ShardFormat shard_format_for(std::size_t vocabulary_size) noexcept;
// 2 or 4.
std::size_t token_width(ShardFormat format) noexcept;
// "gpt2 (magic 20240520, version 1, uint16 tokens)", for messages.
std::string describe(ShardFormat format);

class ShardWriter {
 public:
  // A shard at `path` for ids below `vocabulary_size` (a Tokenizer's vocabulary_size()),
  // in shard_format_for(vocabulary_size), or in `format` when given (llama3 holds any
  // vocabulary; gpt2 only those up to 65,536: else an Error). Nothing exists at `path`
  // until commit().
  ShardWriter(const std::string& path, std::size_t vocabulary_size);
  ShardWriter(const std::string& path, std::size_t vocabulary_size, ShardFormat format);

  // Appends tokens. An id not below the vocabulary size is an Error naming it and its
  // position in the shard, and so is going past kMaxShardTokens; nothing of a refused
  // call is written, and the writer then takes no more calls (the shard never appears).
  void write(std::span<const TokenId> tokens);
  // Writes the count into the header and makes the shard appear whole (flushed,
  // renamed). A shard of no tokens is refused (llm.c's loader refuses one).
  void commit();

  std::uint64_t tokens_written() const noexcept { return tokens_; }
  ShardFormat format() const noexcept { return format_; }

 private:
  void flush();

  AtomicFileWriter file_;
  std::size_t vocabulary_size_;
  ShardFormat format_;
  std::uint64_t tokens_ = 0;
  std::string buffer_;  // encoded tokens not yet handed to the file
  bool failed_ = false;
};

// One shard, mapped read-only and checked: the file's size is at least the header, the
// magic and version are one of the two layouts, the count is at least 1 and makes the
// file's size exactly (a cut tail or extra bytes are refused), and every token is below
// `vocabulary_size` (the whole shard is read once, on the thread pool). Immutable after:
// any number of threads may read it at once.
class TokenShard {
 public:
  TokenShard(const std::string& path, std::size_t vocabulary_size);

  const std::string& path() const noexcept { return file_.path(); }
  ShardFormat format() const noexcept { return format_; }
  // Tokens in the shard.
  std::size_t size() const noexcept { return size_; }
  // Token i (i < size(), unchecked).
  TokenId at(std::size_t i) const noexcept;
  // Tokens [begin, begin + out.size()) into `out`, as int64 (class indices for a loss).
  // An Error when the range passes the end.
  void read(std::size_t begin, std::span<std::int64_t> out) const;
  // xgrad::fingerprint of the whole file (autograd/files.hpp), computed when asked.
  std::uint64_t fingerprint() const;

 private:
  MappedFile file_;
  ShardFormat format_ = ShardFormat::gpt2;
  std::size_t size_ = 0;
  const unsigned char* tokens_ = nullptr;  // into the map, past the header
};

}  // namespace xgrad::text
