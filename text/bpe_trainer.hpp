#pragma once
// Learning a byte-level BPE vocabulary from text: the result is a Tokenizer
// (text/tokenizer.hpp), which text/vocabulary_files.hpp writes in GPT-2's and tiktoken's
// formats.
//
// The text is cut into GPT-2's pieces (text/pretokenizer.hpp), so a token never spans two
// pieces. Ranks 0 to 255 are the 256 single bytes in byte order (id b is byte b); then
// each step adds one token, rank 256, 257, ...: the most frequent pair of adjacent
// tokens, the two end to end. The special tokens follow the ranks, in the order given.
//
// What is counted: every piece is held encoded exactly as the Tokenizer of the ranks so
// far encodes it (whole when the piece is a token, else merged by rank, the leftmost of
// equals); a pair's count is the number of places, over all pieces with their
// repetitions, where two adjacent tokens of those encodings make that byte string end to
// end (overlapping places each count: "aaa" holds "aa" twice). So the trained tokenizer
// encodes its training text into exactly the tokens training ended with.
//
// Ties: of pairs with the same count, the one whose bytes (the two tokens end to end)
// are smallest wins, compared byte by byte as unsigned values, a prefix before a longer
// string ("a" < "ab" < "b" < "\xC3"). The result depends on the texts alone, never on the
// thread count or the order texts were added in.
//
// Training stops at the vocabulary size asked for, or earlier when the most frequent pair
// occurs fewer than min_pair_count times, or when no pair is left (every piece is one
// token); TrainedVocabulary::stop says which. A pair whose bytes are a special token's
// text is never made a token (the two would clash).
//
// Example:
//   const TrainedVocabulary trained = train_bpe(text, {.vocabulary_size = 8192, .special_tokens = {"<|endoftext|>"}});
//   const Tokenizer& tokenizer = trained.tokenizer;  // 8,191 ranks, "<|endoftext|>" = 8191
//   std::cout << trained.bytes_per_token() << "\n";  // the compression of the text

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "xgrad/text/tokenizer.hpp"

namespace xgrad::text {

// The pieces of some texts and how often each occurs: what training learns from. Add
// texts in any number and order (each text's pieces are its own: none spans two texts);
// the counts are the same whatever the order. A special token's text in a text is
// ordinary text here (its pieces are counted, as encode_ordinary reads it): give the
// documents between special tokens as texts of their own.
class PieceCounts {
 public:
  // Adds the pieces of `text`. A long text is cut into stretches of about 256 KiB at
  // gpt2_safe_cut's places (the pieces are the whole text's) and counted on the thread
  // pool (autograd/parallel.hpp). No piece spans two calls: to add one text in parts (a
  // progress bar's), cut it where gpt2_safe_cut allows, and the counts are the whole's.
  void add(std::string_view text);

  // Distinct pieces.
  std::size_t unique_pieces() const noexcept { return counts_.size(); }
  // Pieces and bytes added, repetitions included.
  std::uint64_t pieces() const noexcept { return pieces_; }
  std::uint64_t bytes() const noexcept { return bytes_; }
  // Each distinct piece and its count, sorted by bytes (views valid until the next add()
  // or the counts go).
  std::vector<std::pair<std::string_view, std::uint64_t>> sorted() const;

 private:
  std::unordered_map<std::string, std::uint64_t> counts_;
  std::uint64_t pieces_ = 0, bytes_ = 0;
};

struct BpeTrainerOptions {
  // The trained tokenizer's vocabulary_size(), special tokens included: 256 single
  // bytes + merges + special tokens. At least 256 + the special tokens, at most 2^32.
  std::size_t vocabulary_size = 0;
  // Special tokens' texts (distinct, non-empty), given ids after the ranks in this order.
  std::vector<std::string> special_tokens = {};
  // A pair occurring fewer times than this is never merged (at least 1).
  std::uint64_t min_pair_count = 2;
  // Called after each rank made, with the ranks so far: a progress report, or a way to
  // stop (an exception it throws leaves train_bpe as it came).
  std::function<void(std::size_t ranks)> after_each_rank = {};
};

struct TrainedVocabulary {
  enum class Stop {
    vocabulary_full,  // the size asked for
    pairs_too_rare,   // the most frequent pair occurs fewer than min_pair_count times
    no_pairs_left,    // every piece is one token
  };
  Tokenizer tokenizer;
  Stop stop;
  // The training texts encoded by the tokenizer: their bytes and their tokens.
  std::uint64_t text_bytes = 0, text_tokens = 0;

  // Merges made: the tokenizer's ranks past the 256 single bytes.
  std::size_t merges() const noexcept { return tokenizer.rank_count() - 256; }
  // The compression of the training texts (0 for no text).
  double bytes_per_token() const noexcept {
    return text_tokens ? static_cast<double>(text_bytes) / static_cast<double>(text_tokens) : 0.0;
  }
};

// Bad options are Errors naming the option and its value ("train_bpe: vocabulary_size is
// 100: ..."), before any work.
TrainedVocabulary train_bpe(const PieceCounts& counts, const BpeTrainerOptions& options);
// The same, from one text.
TrainedVocabulary train_bpe(std::string_view text, const BpeTrainerOptions& options);

// The name of a Stop, for messages and reports ("vocabulary_full", ...).
const char* stop_name(TrainedVocabulary::Stop stop) noexcept;

}  // namespace xgrad::text
