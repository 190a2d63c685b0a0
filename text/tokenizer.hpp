#pragma once
// Byte-level BPE with ranked merges, as GPT-2 defines it and tiktoken encodes it.
//
// A Tokenizer holds the ordinary tokens, byte strings ranked 0, 1, 2, ... (a token's rank
// is its id; ranks 0 to 255 are the 256 single bytes, in any order), and special tokens
// (texts such as "<|endoftext|>" with ids of their own, after the ranks).
//
// Encoding cuts the text into GPT-2's pieces (text/pretokenizer.hpp); a piece that is a
// token whole is that token; any other starts as its bytes and repeatedly merges the
// adjacent pair whose concatenation has the lowest rank (the leftmost of equals) until
// no pair is a token. Any bytes encode, invalid UTF-8 included (text/utf8.hpp), and
// decode(encode(bytes)) gives them back.
//
// Special tokens, as tiktoken: encode_ordinary() treats their text as ordinary text;
// encode() turns the allowed ones into their ids (the text between them encoded as
// ordinary text, each stretch on its own) and refuses a text that holds a special token
// it was not allowed. Where two special tokens start at the same byte, the longer wins.
//
// A Tokenizer is immutable and cheap to copy (its tables are shared); every member may be
// called from any number of threads at once. Bad input (to the constructor, encode() or
// decode()) is an xgrad::Error naming what is wrong.
//
// Example:
//   const Tokenizer gpt2 = parse_gpt2_vocabulary(...);           // text/vocabulary_files.hpp
//   std::vector<TokenId> ids = gpt2.encode("Hello<|endoftext|>", AllowedSpecial::all());
//   std::string text = gpt2.decode(ids);                         // "Hello<|endoftext|>"

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace xgrad::text {

using TokenId = std::uint32_t;

struct SpecialToken {
  std::string text;
  TokenId id;
  bool operator==(const SpecialToken&) const = default;
};

// The special tokens encode() may turn into their ids: all, none, or those named.
class AllowedSpecial {
 public:
  static AllowedSpecial all();
  static AllowedSpecial none();
  AllowedSpecial(std::initializer_list<std::string_view> texts);
  explicit AllowedSpecial(std::vector<std::string> texts);

  bool allows(std::string_view special_text) const noexcept;
  bool allows_all() const noexcept { return all_; }
  const std::vector<std::string>& named() const noexcept { return texts_; }

 private:
  AllowedSpecial() = default;
  bool all_ = false;
  std::vector<std::string> texts_;
};

class Tokenizer {
 public:
  // ranked_tokens[r]: the bytes of the token of rank (and id) r. Checked: no token empty
  // or twice, ranks 0 to 255 the 256 single bytes; special tokens with distinct,
  // non-empty texts that are no ordinary token, and distinct ids from ranked_tokens.size()
  // on (gaps allowed).
  explicit Tokenizer(std::vector<std::string> ranked_tokens, std::vector<SpecialToken> special_tokens = {});

  // The ids of `text`, special tokens' texts read as ordinary text. A long text is cut
  // into stretches of about 256 KiB (at gpt2_safe_cut's places, which depend on the text
  // alone) encoded on the thread pool (autograd/parallel.hpp): the same ids on any number
  // of threads.
  std::vector<TokenId> encode_ordinary(std::string_view text) const;
  // The same, appended to `ids` (which keeps its memory from call to call).
  void encode_ordinary(std::string_view text, std::vector<TokenId>& ids) const;
  // The ids of `text`, the allowed special tokens as their ids. An Error names a special
  // token the text holds that is not allowed (and its byte offset), or an allowed name
  // that is no special token of this tokenizer.
  std::vector<TokenId> encode(std::string_view text, const AllowedSpecial& allowed) const;

  // The bytes of `ids` (a special token's are its text). An id that is no token is an
  // Error naming it and the vocabulary's size.
  std::string decode(std::span<const TokenId> ids) const;
  // One token's bytes (a view into the tokenizer, valid while a copy of it lives).
  std::string_view token_bytes(TokenId id) const;

  // The id of an ordinary token, by its bytes.
  std::optional<TokenId> find_token(std::string_view bytes) const noexcept;
  // The id of a special token, by its text.
  std::optional<TokenId> find_special(std::string_view text) const noexcept;

  // Ordinary tokens: ids 0 to rank_count() - 1.
  std::size_t rank_count() const noexcept;
  // One past the largest id, special tokens included: what an embedding table needs.
  std::size_t vocabulary_size() const noexcept;
  // The special tokens, by id.
  const std::vector<SpecialToken>& special_tokens() const noexcept;

  // The tokenizer's identity, 64 hex digits: the SHA-256 of its ranked tokens and its
  // special tokens (texts and ids), and of the pre-tokenizer's name. Two tokenizers with
  // the same identity encode every text alike; a checkpoint records it.
  const std::string& identity() const noexcept;

 private:
  struct State;
  std::shared_ptr<const State> state_;
};

// The special tokens that begin and end a text, by the names published tokenizers give
// them: GPT-2's <|endoftext|> (both), <s> and </s>, Llama 3's <|begin_of_text|> and
// <|end_of_text|> or <|eot_id|>, ChatML's <|im_end|>, <bos> and <eos>; else the only
// special token (both). Nothing when no special token is named so: a runtime that stops
// at the end of a text has none to stop at.
struct TextBounds {
  TokenId beginning, end;
};
std::optional<TextBounds> text_bounds(const Tokenizer& tokenizer);

}  // namespace xgrad::text
