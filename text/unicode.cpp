#include "xgrad/text/unicode.hpp"

#include <unicode/uchar.h>

#include <array>

#include "xgrad/autograd/error.hpp"

namespace xgrad::text {

namespace {

CharClass class_from_icu(char32_t code_point) {
  const auto c = static_cast<UChar32>(code_point);
  if (u_isUWhiteSpace(c)) return CharClass::whitespace;
  switch (u_charType(c)) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return CharClass::letter;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      return CharClass::number;
    default:
      return CharClass::other;
  }
}

// The Basic Multilingual Plane, where nearly all text lives, read from ICU once.
using PlaneTable = std::array<CharClass, 0x10000>;

const PlaneTable& basic_plane() {
  static const PlaneTable table = [] {
    PlaneTable classes;
    for (char32_t c = 0; c < classes.size(); ++c) classes[c] = class_from_icu(c);
    return classes;
  }();
  return table;
}

}  // namespace

CharClass char_class(char32_t code_point) noexcept {
  if (code_point < 0x10000) return basic_plane()[code_point];
  if (code_point > 0x10FFFF) return CharClass::other;  // kInvalidByte
  return class_from_icu(code_point);
}

std::string unicode_version() {
  UVersionInfo version;
  u_getUnicodeVersion(version);
  return str(int(version[0]), '.', int(version[1]));
}

}  // namespace xgrad::text
