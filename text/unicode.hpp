#pragma once
// The character classes of GPT-2's pre-tokenizer, as the Rust regex crate (tiktoken's)
// defines \p{L}, \p{N} and \s:
//   letter      general categories Lu, Ll, Lt, Lm, Lo
//   number      Nd, Nl, No
//   whitespace  the White_Space property (U+0009..000D, U+0020, U+0085, U+00A0, U+1680,
//               U+2000..200A, U+2028, U+2029, U+202F, U+205F, U+3000; not U+FEFF nor
//               U+200B, which JavaScript's \s treats otherwise)
//   other       everything else: marks, punctuation, symbols, controls that are not
//               White_Space, unassigned code points, and kInvalidByte (text/utf8.hpp)
// The tables are ICU's (the Unicode version unicode_version() gives), read once into a
// table for the Basic Multilingual Plane; the other planes ask ICU each time.

#include <cstdint>
#include <string>

namespace xgrad::text {

enum class CharClass : std::uint8_t { other, letter, number, whitespace };

CharClass char_class(char32_t code_point) noexcept;

// The Unicode version of the classes, e.g. "15.0".
std::string unicode_version();

}  // namespace xgrad::text
