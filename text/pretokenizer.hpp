#pragma once
// GPT-2's pre-tokenizer: text cut into pieces, each encoded by BPE on its own. The rules
// of tiktoken's "gpt2" (r50k_base) pattern,
//     '(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// written as code. At each position the first rule that matches takes the piece:
//   1. an ASCII apostrophe and one of s, d, m, t, ll, ve, re (lowercase only; "'st" gives
//      "'s" then "t"; look-alikes such as U+2019 are symbols);
//   2. an optional space (U+0020 only) and a run of letters;
//   3. an optional space and a run of numbers;
//   4. an optional space and a run of other characters (neither letter, number nor
//      whitespace: punctuation, symbols, marks, controls, bytes outside UTF-8);
//   5. a run of whitespace: all of it when it ends the text; when a non-space follows and
//      the run is two characters or more, all but its last character (which, a space,
//      then begins the next word: "a  b" is "a", " ", " b"); a single whitespace
//      character before a non-space is a piece alone ("\n" in "a\nb").
// The classes are text/unicode.hpp's; invalid UTF-8 reads byte by byte as "other"
// (text/utf8.hpp). The pieces cover the text exactly, in order.

#include <cstddef>
#include <string_view>
#include <vector>

namespace xgrad::text {

// The pieces of a text, one at a time:
//   Gpt2Pieces pieces(text);
//   for (std::string_view piece = pieces.next(); !piece.empty(); piece = pieces.next()) ...
class Gpt2Pieces {
 public:
  explicit Gpt2Pieces(std::string_view text) noexcept : text_(text) {}
  // The next piece, or an empty view once the text is used up. Views into the text.
  std::string_view next() noexcept;

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
};

// Every piece of a text at once.
std::vector<std::string_view> gpt2_pieces(std::string_view text);

// The first place at or after `from` where the text may be cut without changing its
// pieces (the pieces of text[0, cut) then those of text[cut, end) are the whole text's),
// or text.size() when there is none: an ASCII whitespace byte right after an ASCII byte
// that is not whitespace (before the space of " word", the newline of "end.\n"). No
// piece holds a non-space character and the whitespace after it, and the pieces before
// such a place do not depend on what follows it. How long texts are cut for the thread
// pool, and how a reader may cut a stream.
std::size_t gpt2_safe_cut(std::string_view text, std::size_t from) noexcept;

}  // namespace xgrad::text
