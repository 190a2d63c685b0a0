#pragma once
// UTF-8 read as it comes: reading never fails, and every byte string is text.
//
// A valid UTF-8 sequence (Unicode's Table 3-7: the shortest form, no surrogate, at most
// U+10FFFF) reads as one character, its code point. Every byte that does not begin a
// valid sequence is a unit of its own, one byte long, read as kInvalidByte: a stray
// continuation byte (80..BF), the bytes C0, C1 and F5..FF, the lead byte of an overlong
// form, of an encoded surrogate (ED A0..BF) or of a sequence past U+10FFFF (F4 90..), and
// the lead byte of a sequence cut short. Reading goes on at the next byte, so the
// continuation bytes after such a lead are stray ones, each a unit too.
//
// kInvalidByte is a character that is neither a letter, a number nor whitespace
// (text/unicode.hpp): the pre-tokenizer puts it with the symbols, byte-level BPE encodes
// its byte like any other, and decoding gives the byte back.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace xgrad::text {

// No code point has this value: what a byte outside valid UTF-8 reads as.
inline constexpr char32_t kInvalidByte = 0x110000;

// One unit of text: a character and the bytes it takes (1 to 4; 1 for kInvalidByte).
struct Utf8Char {
  char32_t code_point;
  std::uint32_t length;
};

// The unit that starts at text[pos]; pos < text.size().
inline Utf8Char read_utf8(std::string_view text, std::size_t pos) noexcept {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data()) + pos;
  const std::size_t left = text.size() - pos;
  const char32_t b0 = s[0];
  if (b0 < 0x80) return {b0, 1};
  const auto continuation = [&](std::size_t i, unsigned low = 0x80, unsigned high = 0xBF) {
    return i < left && s[i] >= low && s[i] <= high;
  };
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (continuation(1)) return {((b0 & 0x1F) << 6) | (s[1] & 0x3F), 2};
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    // E0 needs A0..BF second (no overlong form), ED 80..9F (no surrogate).
    const unsigned low = b0 == 0xE0 ? 0xA0 : 0x80, high = b0 == 0xED ? 0x9F : 0xBF;
    if (continuation(1, low, high) && continuation(2))
      return {((b0 & 0x0F) << 12) | (char32_t(s[1] & 0x3F) << 6) | (s[2] & 0x3F), 3};
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    // F0 needs 90..BF second (no overlong form), F4 80..8F (nothing past U+10FFFF).
    const unsigned low = b0 == 0xF0 ? 0x90 : 0x80, high = b0 == 0xF4 ? 0x8F : 0xBF;
    if (continuation(1, low, high) && continuation(2) && continuation(3))
      return {((b0 & 0x07) << 18) | (char32_t(s[1] & 0x3F) << 12) | (char32_t(s[2] & 0x3F) << 6) | (s[3] & 0x3F), 4};
  }
  return {kInvalidByte, 1};
}

// Whether every unit of text is a valid character (no kInvalidByte).
bool is_valid_utf8(std::string_view text) noexcept;

// "U+00E9": a code point as Unicode writes it (at least four hex digits), for messages.
std::string code_point_label(char32_t code_point);

// Bytes in double quotes for a message: valid UTF-8 as it is, except that quotes and
// backslashes are escaped and controls and bytes outside UTF-8 are written \xNN.
std::string quote_bytes(std::string_view bytes);

// Appends the UTF-8 form of a code point; a surrogate or a value past U+10FFFF is an Error.
void append_utf8(std::string& out, char32_t code_point);

}  // namespace xgrad::text
