#include "xgrad/text/utf8.hpp"

#include <cstdio>

#include "xgrad/autograd/error.hpp"

namespace xgrad::text {

bool is_valid_utf8(std::string_view text) noexcept {
  for (std::size_t pos = 0; pos < text.size();) {
    const Utf8Char c = read_utf8(text, pos);
    if (c.code_point == kInvalidByte) return false;
    pos += c.length;
  }
  return true;
}

std::string code_point_label(char32_t code_point) {
  char label[16];
  std::snprintf(label, sizeof label, "U+%04X", static_cast<unsigned>(code_point));
  return label;
}

std::string quote_bytes(std::string_view bytes) {
  std::string quoted = "\"";
  for (std::size_t pos = 0; pos < bytes.size();) {
    const Utf8Char c = read_utf8(bytes, pos);
    const bool control = c.code_point < 0x20 || c.code_point == 0x7F || (c.code_point >= 0x80 && c.code_point < 0xA0);
    if (c.code_point == kInvalidByte || control) {
      for (std::size_t i = 0; i < c.length; ++i) {
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\x%02X", static_cast<unsigned char>(bytes[pos + i]));
        quoted += escaped;
      }
    } else {
      if (c.code_point == '"' || c.code_point == '\\') quoted += '\\';
      quoted.append(bytes.substr(pos, c.length));
    }
    pos += c.length;
  }
  return quoted + '"';
}

void append_utf8(std::string& out, char32_t c) {
  XGRAD_CHECK(c <= 0x10FFFF && (c < 0xD800 || c > 0xDFFF), "append_utf8", code_point_label(c),
              " is no Unicode scalar value (a surrogate, or past U+10FFFF)");
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

}  // namespace xgrad::text
