#include "xgrad/text/pretokenizer.hpp"

#include <algorithm>
#include <array>

#include "xgrad/text/unicode.hpp"
#include "xgrad/text/utf8.hpp"

namespace xgrad::text {

namespace {

// ASCII's classes, without a call: most text is ASCII. (The tests hold it to char_class.)
constexpr std::array<CharClass, 128> kAsciiClasses = [] {
  std::array<CharClass, 128> classes{};
  for (int c = 0; c < 128; ++c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
      classes[c] = CharClass::letter;
    else if (c >= '0' && c <= '9')
      classes[c] = CharClass::number;
    else if ((c >= 0x09 && c <= 0x0D) || c == ' ')
      classes[c] = CharClass::whitespace;
    else
      classes[c] = CharClass::other;
  }
  return classes;
}();

struct Unit {
  CharClass cls;
  std::uint32_t length;
};

inline Unit unit_at(std::string_view text, std::size_t pos) {
  const auto byte = static_cast<unsigned char>(text[pos]);
  if (byte < 0x80) return {kAsciiClasses[byte], 1};
  const Utf8Char c = read_utf8(text, pos);
  return {char_class(c.code_point), c.length};
}

// The length of rule 1's match at pos (an apostrophe there), or 0.
inline std::size_t contraction_length(std::string_view text, std::size_t pos) {
  if (pos + 1 >= text.size()) return 0;
  const char a = text[pos + 1];
  if (a == 's' || a == 'd' || a == 'm' || a == 't') return 2;
  if (pos + 2 >= text.size()) return 0;
  const char b = text[pos + 2];
  return (a == 'l' && b == 'l') || (a == 'v' && b == 'e') || (a == 'r' && b == 'e') ? 3 : 0;
}

}  // namespace

std::string_view Gpt2Pieces::next() noexcept {
  const std::size_t size = text_.size(), start = pos_;
  if (start >= size) return {};
  if (text_[start] == '\'') {
    if (const std::size_t length = contraction_length(text_, start)) {
      pos_ = start + length;
      return text_.substr(start, length);
    }
  }
  // Rules 2 to 4: a run of one class, after an optional space.
  std::size_t run_start = start;
  Unit first = unit_at(text_, start);
  if (text_[start] == ' ' && start + 1 < size) {
    const Unit after_space = unit_at(text_, start + 1);
    if (after_space.cls != CharClass::whitespace) {
      run_start = start + 1;
      first = after_space;
    }
  }
  std::size_t end = run_start + first.length;
  if (first.cls != CharClass::whitespace) {
    while (end < size) {
      const Unit u = unit_at(text_, end);
      if (u.cls != first.cls) break;
      end += u.length;
    }
    pos_ = end;
    return text_.substr(start, end - start);
  }
  // Rule 5: whitespace. Before a non-space, \s+(?!\S) backtracks one character.
  std::size_t last = start;  // where the run's last character starts
  while (end < size) {
    const Unit u = unit_at(text_, end);
    if (u.cls != CharClass::whitespace) break;
    last = end;
    end += u.length;
  }
  if (end < size && last > start) end = last;
  pos_ = end;
  return text_.substr(start, end - start);
}

std::vector<std::string_view> gpt2_pieces(std::string_view text) {
  std::vector<std::string_view> pieces;
  Gpt2Pieces cut(text);
  for (std::string_view piece = cut.next(); !piece.empty(); piece = cut.next()) pieces.push_back(piece);
  return pieces;
}

std::size_t gpt2_safe_cut(std::string_view text, std::size_t from) noexcept {
  const auto ascii_class = [&](std::size_t pos) {
    const auto byte = static_cast<unsigned char>(text[pos]);
    return byte < 0x80 ? kAsciiClasses[byte] : CharClass::other;
  };
  for (std::size_t cut = std::max<std::size_t>(from, 1); cut < text.size(); ++cut) {
    const bool ascii = static_cast<unsigned char>(text[cut - 1]) < 0x80 && static_cast<unsigned char>(text[cut]) < 0x80;
    if (ascii && ascii_class(cut) == CharClass::whitespace && ascii_class(cut - 1) != CharClass::whitespace) return cut;
  }
  return text.size();
}

}  // namespace xgrad::text
