#define BOOST_TEST_MODULE text_bpe
// The tokenizer layer (text/): UTF-8 read as it comes, the character classes, GPT-2's
// pre-tokenizer, its byte alphabet, ranked BPE, special tokens, decoding, the identity and
// the vocabulary files with every class of bad input. (GPT-2's own vocabulary against
// tiktoken: text_reference/compare.cjs.)
#include "helpers.hpp"

#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "xgrad/autograd/parallel.hpp"
#include "xgrad/text/detail/merge.hpp"
#include "xgrad/text/text.hpp"

using namespace xgrad;
using namespace xgrad::text;
using xgrad::test::check_error;

namespace {

std::vector<std::string> strings(const std::vector<std::string_view>& views) {
  return std::vector<std::string>(views.begin(), views.end());
}

// The 256 single bytes (in byte order), then one token per merge, each two earlier
// tokens end to end.
std::vector<std::string> ranked_from_merges(const std::vector<std::pair<std::string, std::string>>& merges) {
  std::vector<std::string> ranked;
  for (int byte = 0; byte < 256; ++byte) ranked.emplace_back(1, static_cast<char>(byte));
  for (const auto& [left, right] : merges) ranked.push_back(left + right);
  return ranked;
}

const std::vector<std::pair<std::string, std::string>> kMerges = {
    {"t", "h"}, {"th", "e"},   {" ", "the"}, {"a", "n"},   {"an", "d"},  {" ", "and"}, {"i", "n"},   {"in", "g"},
    {"e", "r"}, {" ", "a"},    {"'", "s"},   {"l", "l"},   {"o", "r"},   {" ", "w"},   {" w", "or"}, {"ll", "o"},
    {"h", "e"}, {"he", "llo"}, {" ", " "},   {"  ", "  "}, {"\n", "\n"}, {"1", "2"},   {"12", "3"},  {"\xC3", "\xA9"}};

// A small tokenizer: kMerges' ranks (a merge's token is rank 256 + its index) and the end
// of text at 280.
Tokenizer small_tokenizer() { return Tokenizer(ranked_from_merges(kMerges), {{"<|endoftext|>", 280}}); }

TokenId rank_of(const Tokenizer& t, std::string_view bytes) {
  const auto id = t.find_token(bytes);
  BOOST_REQUIRE_MESSAGE(id, "no token " << quote_bytes(bytes));
  return *id;
}

// tiktoken's algorithm written plainly: whole pieces first, else merge the lowest-ranked
// adjacent pair (the leftmost of equals) until none is a token.
std::vector<TokenId> reference_encode(const std::map<std::string, TokenId, std::less<>>& ranks, std::string_view text) {
  std::vector<TokenId> ids;
  for (const std::string_view piece : gpt2_pieces(text)) {
    if (const auto whole = ranks.find(piece); whole != ranks.end()) {
      ids.push_back(whole->second);
      continue;
    }
    std::vector<std::string> parts;
    for (const char byte : piece) parts.emplace_back(1, byte);
    for (;;) {
      std::size_t best = parts.size();
      TokenId best_rank = text::detail::kNoRank;
      for (std::size_t i = 0; i + 1 < parts.size(); ++i)
        if (const auto it = ranks.find(parts[i] + parts[i + 1]); it != ranks.end() && it->second < best_rank)
          best = i, best_rank = it->second;
      if (best == parts.size()) break;
      parts[best] += parts[best + 1];
      parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    }
    for (const std::string& part : parts) ids.push_back(ranks.at(part));
  }
  return ids;
}

// Random text from every class the pre-tokenizer tells apart, invalid UTF-8 included.
std::string random_text(std::mt19937& rng, std::size_t units) {
  static const std::vector<std::string> kUnits = {"a",
                                                  "b",
                                                  "e",
                                                  "t",
                                                  "h",
                                                  "Z",
                                                  "1",
                                                  "2",
                                                  "3",
                                                  "0",
                                                  " ",
                                                  " ",
                                                  "  ",
                                                  "\n",
                                                  "\t",
                                                  "\r",
                                                  "'",
                                                  "'s",
                                                  "'ll",
                                                  "'T",
                                                  "!",
                                                  ".",
                                                  ",",
                                                  "-",
                                                  "\xC3\xA9",
                                                  "\xE2\x80\x99",
                                                  "\xC2\xA0",
                                                  "\xE3\x80\x80",
                                                  "\xC2\x85",
                                                  "\xEF\xBB\xBF",
                                                  "\xE4\xBD\xA0",
                                                  "\xF0\x9F\x98\x80",
                                                  "\xCC\x81",
                                                  "\xD9\xA3",
                                                  "\xE2\x85\xAB",
                                                  "\x00",
                                                  "\x1F",
                                                  "\x7F",
                                                  "\x80",
                                                  "\xFF",
                                                  "\xC0\xAF",
                                                  "\xED\xA0\x80",
                                                  "\xF4\x90\x80\x80",
                                                  "\xE2\x82",
                                                  "<|endoftext|>"};
  std::string text;
  for (std::size_t i = 0; i < units; ++i) {
    const std::string& unit = kUnits[rng() % kUnits.size()];
    text += rng() % 10 == 0 ? std::string(unit).append(unit).append(unit) : unit;
  }
  return text;
}

std::string random_bytes(std::mt19937& rng, std::size_t n) {
  std::string bytes(n, '\0');
  for (char& b : bytes) b = static_cast<char>(rng() & 0xFF);
  return bytes;
}

}  // namespace

// ---- UTF-8 ----------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(valid_utf8_reads_as_code_points) {
  const std::vector<std::pair<std::string, char32_t>> cases = {{"A", 0x41},
                                                               {std::string(1, '\0'), 0},
                                                               {"\xC2\x80", 0x80},
                                                               {"\xDF\xBF", 0x7FF},
                                                               {"\xE0\xA0\x80", 0x800},
                                                               {"\xED\x9F\xBF", 0xD7FF},
                                                               {"\xEE\x80\x80", 0xE000},
                                                               {"\xEF\xBF\xBF", 0xFFFF},
                                                               {"\xF0\x90\x80\x80", 0x10000},
                                                               {"\xF4\x8F\xBF\xBF", 0x10FFFF}};
  for (const auto& [bytes, code_point] : cases) {
    const Utf8Char c = read_utf8(bytes, 0);
    BOOST_CHECK_EQUAL(std::uint32_t(c.code_point), std::uint32_t(code_point));
    BOOST_CHECK_EQUAL(c.length, bytes.size());
    BOOST_CHECK(is_valid_utf8(bytes));
  }
}

BOOST_AUTO_TEST_CASE(every_code_point_round_trips_and_only_the_shortest_form_is_read) {
  // Every scalar value written and read back; then every sequence of up to three bytes
  // (and 4-byte ones by sampling) that reads as a character is exactly that character's
  // UTF-8: no overlong form, surrogate or value past U+10FFFF gets through.
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    std::string bytes;
    append_utf8(bytes, c);
    const Utf8Char read = read_utf8(bytes, 0);
    if (read.code_point != c || read.length != bytes.size()) BOOST_FAIL(code_point_label(c) << " reads back wrong");
  }
  const auto shortest = [](const std::string& bytes) {
    const Utf8Char c = read_utf8(bytes, 0);
    if (c.code_point == kInvalidByte) return c.length == 1;
    std::string again;
    append_utf8(again, c.code_point);
    return again == bytes.substr(0, c.length);
  };
  for (unsigned a = 0x80; a < 0x100; ++a)
    for (unsigned b = 0; b < 0x100; ++b)
      for (unsigned c = 0; c < 0x100; ++c)
        if (!shortest({char(a), char(b), char(c)}))
          BOOST_FAIL("bytes " << std::hex << a << " " << b << " " << c << " read as a non-shortest form");
  std::mt19937 rng(7);
  for (int i = 0; i < 2000000; ++i) {
    const std::string bytes = {char(0xF0 | (rng() & 7)), char(rng()), char(rng()), char(rng())};
    if (!shortest(bytes)) BOOST_FAIL(quote_bytes(bytes) << " reads as a non-shortest form");
  }
  check_error(
      [] {
        std::string s;
        append_utf8(s, 0xD800);
      },
      {"append_utf8", "U+D800", "surrogate"});
  check_error(
      [] {
        std::string s;
        append_utf8(s, 0x110000);
      },
      {"append_utf8", "U+110000"});
}

BOOST_AUTO_TEST_CASE(each_byte_of_an_invalid_sequence_is_a_unit_of_its_own) {
  // Stray continuations, overlong forms, surrogates, sequences cut short, past U+10FFFF,
  // bytes UTF-8 never uses: the units, in bytes, up to the next valid character.
  const std::vector<std::pair<std::string, std::vector<std::uint32_t>>> cases = {
      {"\x80", {1}},                       // a stray continuation
      {"\xBF\x80", {1, 1}},                // two
      {"\xC0\xAF", {1, 1}},                // overlong '/'
      {"\xC1\xBF", {1, 1}},                // overlong
      {"\xE0\x80\xAF", {1, 1, 1}},         // overlong, 3 bytes
      {"\xF0\x80\x80\xAF", {1, 1, 1, 1}},  // overlong, 4 bytes
      {"\xED\xA0\x80", {1, 1, 1}},         // the surrogate U+D800
      {"\xED\xBF\xBF", {1, 1, 1}},         // U+DFFF
      {"\xE2\x82", {1, 1}},                // cut short at the end
      {"\xE2\x82"
       "A",
       {1, 1, 1}},                         // cut short before a character
      {"\xF0\x9F\x98", {1, 1, 1}},         // a 4-byte sequence cut short
      {"\xF4\x90\x80\x80", {1, 1, 1, 1}},  // U+110000
      {"\xF5\x80\x80\x80", {1, 1, 1, 1}},  // F5: never a lead
      {"\xFF\xFE", {1, 1}},
      {"\xC3"
       "\xC3\xA9",
       {1, 2}},  // a lead cut short, then a valid 'é'
  };
  for (const auto& [bytes, lengths] : cases) {
    BOOST_TEST_CONTEXT(quote_bytes(bytes)) {
      std::vector<std::uint32_t> read;
      for (std::size_t pos = 0; pos < bytes.size();) {
        const Utf8Char c = read_utf8(bytes, pos);
        if (c.length == 1 && static_cast<unsigned char>(bytes[pos]) >= 0x80) BOOST_CHECK(c.code_point == kInvalidByte);
        read.push_back(c.length);
        pos += c.length;
      }
      BOOST_CHECK(read == lengths);
      BOOST_CHECK(!is_valid_utf8(bytes));
    }
  }
  BOOST_CHECK(char_class(kInvalidByte) == CharClass::other);
}

BOOST_AUTO_TEST_CASE(invalid_bytes_are_symbols_to_the_pre_tokenizer_and_round_trip) {
  // Neither letter, number nor whitespace: they join runs of symbols, a space before them.
  BOOST_CHECK(strings(gpt2_pieces("a\x80"
                                  "b")) == (std::vector<std::string>{"a", "\x80", "b"}));
  BOOST_CHECK(strings(gpt2_pieces("x \xFF\xFE!?")) == (std::vector<std::string>{"x", " \xFF\xFE!?"}));
  BOOST_CHECK(strings(gpt2_pieces("\xE2\x82 1")) == (std::vector<std::string>{"\xE2\x82", " 1"}));
  BOOST_CHECK(strings(gpt2_pieces("ab\xC3"
                                  "\xC3\xA9z")) == (std::vector<std::string>{"ab", "\xC3", "\xC3\xA9z"}));
  BOOST_CHECK(strings(gpt2_pieces("  \xED\xA0\x80")) == (std::vector<std::string>{" ", " \xED\xA0\x80"}));
  const Tokenizer t = small_tokenizer();
  std::mt19937 rng(3);
  for (int i = 0; i < 2000; ++i) {
    const std::string bytes = random_bytes(rng, rng() % (i % 50 == 0 ? 2000 : 64));
    BOOST_REQUIRE_MESSAGE(t.decode(t.encode_ordinary(bytes)) == bytes, quote_bytes(bytes));
  }
  BOOST_CHECK_EQUAL(quote_bytes("a\"\\\n\x80\xC2\x85\xC3\xA9"), "\"a\\\"\\\\\\x0A\\x80\\xC2\\x85\xC3\xA9\"");
}

// ---- The character classes and the pre-tokenizer -------------------------------------

BOOST_AUTO_TEST_CASE(classes_follow_the_unicode_properties_tiktoken_uses) {
  BOOST_CHECK(!unicode_version().empty());
  const auto letter = CharClass::letter, number = CharClass::number, space = CharClass::whitespace,
             other = CharClass::other;
  const std::vector<std::pair<char32_t, CharClass>> cases = {
      {U'a', letter},
      {U'Z', letter},
      {U'\u01C5', letter} /* Lt */,
      {U'\u02B0', letter} /* Lm */,
      {U'\u3005', letter} /* Lm */,
      {U'\u3042', letter} /* Lo */,
      {U'\u4F60', letter},
      {U'0', number},
      {U'\u0663', number} /* Nd */,
      {U'\u216B', number} /* Nl */,
      {U'\u00BD', number} /* No */,
      {U'\u00B2', number},
      {U' ', space},
      {U'\t', space},
      {U'\n', space},
      {U'\v', space},
      {U'\f', space},
      {U'\r', space},
      {U'\u0085', space},
      {U'\u00A0', space},
      {U'\u1680', space},
      {U'\u2000', space},
      {U'\u200A', space},
      {U'\u2028', space},
      {U'\u2029', space},
      {U'\u202F', space},
      {U'\u205F', space},
      {U'\u3000', space},
      {U'\uFEFF', other} /* not White_Space (JavaScript's \s has it) */,
      {U'\u200B', other},
      {U'\u180E', other},
      {U'\u001C', other} /* Python's isspace() has it */,
      {U'\u001F', other},
      {U'\0', other},
      {U'\u0301', other} /* Mn */,
      {U'\u0903', other} /* Mc */,
      {U'\'', other},
      {U'\u2019', other},
      {U'!', other},
      {U'\u20AC', other},
      {U'\U0001F600', other},
      {U'\U00020000', letter} /* CJK Extension B, past the BMP */,
      {U'\U0001D7CE', number} /* math digit */,
      {U'\U000E0001', other},
      {char32_t(0x10FFFF), other}};
  for (const auto& [code_point, expected] : cases)
    BOOST_CHECK_MESSAGE(char_class(code_point) == expected, code_point_label(code_point));
}

namespace {

// The pattern '(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ as a
// regex engine runs it: each alternative tried in turn, greedy, backtracking in \s+(?!\S),
// from char_class alone (the library's ASCII table is held to it).
std::vector<std::string> reference_pieces(std::string_view text) {
  std::vector<std::size_t> starts;  // the units
  std::vector<CharClass> classes;
  for (std::size_t pos = 0; pos < text.size();) {
    const Utf8Char c = read_utf8(text, pos);
    starts.push_back(pos);
    classes.push_back(char_class(c.code_point));
    pos += c.length;
  }
  const std::size_t n = starts.size();
  starts.push_back(text.size());
  const auto run = [&](std::size_t from, CharClass cls) {
    std::size_t end = from;
    while (end < n && classes[end] == cls) ++end;
    return end;
  };
  std::vector<std::string> pieces;
  for (std::size_t u = 0; u < n;) {
    std::size_t end = u;
    const std::string_view rest = text.substr(starts[u]);
    for (const std::string_view suffix : {"s", "d", "m", "t", "ll", "ve", "re"})
      if (end == u && rest.size() > suffix.size() && rest[0] == '\'' && rest.substr(1, suffix.size()) == suffix)
        end = u + 1 + suffix.size();
    for (const CharClass cls : {CharClass::letter, CharClass::number, CharClass::other}) {
      if (end != u) break;
      const std::size_t after_space = text[starts[u]] == ' ' && u + 1 < n ? u + 1 : u;
      for (const std::size_t from : {after_space, u})  // ` ?` tries the space first
        if (end == u && from < n && classes[from] == cls) end = run(from, cls);
    }
    if (end == u) {
      const std::size_t longest = run(u, CharClass::whitespace);
      for (std::size_t k = longest; k > u && end == u; --k)  // \s+(?!\S), backtracking
        if (k == n || classes[k] == CharClass::whitespace) end = k;
      if (end == u) end = longest;  // \s+
    }
    pieces.emplace_back(text.substr(starts[u], starts[end] - starts[u]));
    u = end;
  }
  return pieces;
}

}  // namespace

BOOST_AUTO_TEST_CASE(pieces_follow_gpt2s_pattern) {
  using Pieces = std::vector<std::string>;
  const std::vector<std::pair<std::string, Pieces>> cases = {
      {"Hello world", {"Hello", " world"}},
      {"I'm you're we've he'll she'd it's 'tis don't",
       {"I", "'m", " you", "'re", " we", "'ve", " he", "'ll", " she", "'d", " it", "'s", " '", "tis", " don", "'t"}},
      {"I'M YOU'RE 'Ll x'steve 'd", {"I", "'", "M", " YOU", "'", "RE", " '", "Ll", " x", "'s", "teve", " '", "d"}},
      {"it\u2019s", {"it", "\u2019", "s"}},
      {"a  b", {"a", " ", " b"}},
      {"a\nb", {"a", "\n", "b"}},
      {"a \n b", {"a", " \n", " b"}},
      {"a\n\n\nb", {"a", "\n\n", "\n", "b"}},
      {"end  ", {"end", "  "}},
      {"x\t\t1", {"x", "\t", "\t", "1"}},
      {"12345 67.8", {"12345", " 67", ".", "8"}},
      {"foo!!! ?!", {"foo", "!!!", " ?!"}},
      {"a\u00A0b", {"a", "\u00A0", "b"}},
      {"a \u00A0b", {"a", " ", "\u00A0", "b"}},
      {"\u4F60\u597D\uFF0C\u4E16\u754C", {"\u4F60\u597D", "\uFF0C", "\u4E16\u754C"}},
      {"e\u0301t\u00E9", {"e", "\u0301", "t\u00E9"}},
      {"<|endoftext|>", {"<|", "endoftext", "|>"}},
      {"", {}},
  };
  for (const auto& [text, expected] : cases) {
    BOOST_TEST_CONTEXT(quote_bytes(text)) {
      BOOST_CHECK(strings(gpt2_pieces(text)) == expected);
      BOOST_CHECK(reference_pieces(text) == expected);
    }
  }
  // Every ASCII character between and after others, and random text of every class.
  for (int c = 0; c < 128; ++c)
    for (const std::string around : {"a", "1", " ", "!", "'", "\n"}) {
      const std::string text = around + char(c) + around + " " + char(c) + char(c) + "a";
      BOOST_REQUIRE_MESSAGE(strings(gpt2_pieces(text)) == reference_pieces(text), quote_bytes(text));
    }
  std::mt19937 rng(11);
  for (int i = 0; i < 5000; ++i) {
    const std::string text = random_text(rng, rng() % 30);
    const auto pieces = strings(gpt2_pieces(text));
    BOOST_REQUIRE_MESSAGE(pieces == reference_pieces(text), quote_bytes(text));
    std::string joined;
    for (const std::string& piece : pieces) joined += piece;
    BOOST_REQUIRE(joined == text);
  }
}

BOOST_AUTO_TEST_CASE(a_text_cut_where_gpt2_safe_cut_says_keeps_its_pieces) {
  std::mt19937 rng(13);
  std::size_t cuts = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string text = random_text(rng, rng() % 40);
    const auto whole = strings(gpt2_pieces(text));
    for (std::size_t cut = gpt2_safe_cut(text, 0); cut < text.size(); cut = gpt2_safe_cut(text, cut + 1), ++cuts) {
      auto pieces = strings(gpt2_pieces(std::string_view(text).substr(0, cut)));
      const auto rest = strings(gpt2_pieces(std::string_view(text).substr(cut)));
      pieces.insert(pieces.end(), rest.begin(), rest.end());
      BOOST_REQUIRE_MESSAGE(pieces == whole, quote_bytes(text) << " cut at " << cut);
    }
  }
  BOOST_TEST_MESSAGE(cuts << " cuts");
  BOOST_CHECK_GT(cuts, 3000u);
  BOOST_CHECK_EQUAL(gpt2_safe_cut("In the beginning", 0), 2u);  // before " the"
  BOOST_CHECK_EQUAL(gpt2_safe_cut("In the beginning", 3), 6u);
  BOOST_CHECK_EQUAL(gpt2_safe_cut("earth.\n\n  2 And", 0), 6u);  // before the newlines
  BOOST_CHECK_EQUAL(gpt2_safe_cut("a\xC2\xA0 b", 0), 5u);        // not inside NBSP + space
  BOOST_CHECK_EQUAL(gpt2_safe_cut("  \n\t", 0), 4u);             // none
}

// ---- The byte alphabet ---------------------------------------------------------------

BOOST_AUTO_TEST_CASE(the_byte_alphabet_is_gpt2s) {
  std::set<char32_t> symbols;
  char32_t next = 0x100;
  for (unsigned byte = 0; byte < 256; ++byte) {
    const bool itself = (byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || byte >= 174;
    const char32_t expected = itself ? byte : next++;
    BOOST_CHECK_EQUAL(std::uint32_t(byte_to_symbol(std::uint8_t(byte))), std::uint32_t(expected));
    BOOST_CHECK(symbol_to_byte(expected) == std::uint8_t(byte));
    symbols.insert(byte_to_symbol(std::uint8_t(byte)));
  }
  BOOST_CHECK_EQUAL(symbols.size(), 256u);
  BOOST_CHECK_EQUAL(std::uint32_t(next), 0x144u);  // 68 bytes moved
  BOOST_CHECK(byte_to_symbol(' ') == U'\u0120' && byte_to_symbol('\n') == U'\u010A' && byte_to_symbol(0) == U'\u0100');
  BOOST_CHECK(byte_to_symbol(173) == U'\u0143' && byte_to_symbol(127) == U'\u0121');
  BOOST_CHECK_EQUAL(bytes_to_symbols("Hello world\n"), "Hello\u0120world\u010A");
  std::string all;
  for (int byte = 0; byte < 256; ++byte) all += char(byte);
  BOOST_CHECK(symbols_to_bytes(bytes_to_symbols(all)) == all);
  for (const char32_t outside : {U' ', U'\u00A0', U'\u00AD', U'\u0144', U'\u4F60', U'\U0001F600'}) {
    BOOST_CHECK(!symbol_to_byte(outside));
    std::string text = "ab";
    append_utf8(text, outside);
    BOOST_CHECK(!symbols_to_bytes(text));
  }
  BOOST_CHECK(!symbols_to_bytes("a\xC4"));  // not UTF-8
}

// ---- BPE -----------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(the_scan_and_the_heap_merge_alike) {
  // Random vocabularies over a small alphabet (so that many pairs are tokens, ties and
  // overlaps included), random pieces up to past the scan's limit.
  std::mt19937 rng(5);
  for (int round = 0; round < 40; ++round) {
    std::map<std::string, std::uint32_t, std::less<>> ranks;
    for (const char c : std::string("abcd")) ranks.emplace(std::string(1, c), static_cast<std::uint32_t>(ranks.size()));
    while (ranks.size() < 60) {
      auto a = ranks.begin(), b = ranks.begin();
      std::advance(a, rng() % ranks.size());
      std::advance(b, rng() % ranks.size());
      if (a->first.size() + b->first.size() <= 6)
        ranks.emplace(a->first + b->first, static_cast<std::uint32_t>(ranks.size()));
    }
    const auto rank_of = [&](std::string_view bytes) {
      const auto it = ranks.find(bytes);
      return it == ranks.end() ? text::detail::kNoRank : it->second;
    };
    text::detail::MergeScratch scan, heap;
    for (int i = 0; i < 200; ++i) {
      std::string piece(1 + rng() % 300, 'a');
      for (char& c : piece) c = "abcd"[rng() % (round % 2 ? 4 : 2)];
      text::detail::byte_pair_merge_scan(piece, rank_of, scan);
      text::detail::byte_pair_merge_heap(piece, rank_of, heap);
      BOOST_REQUIRE_MESSAGE(scan.starts == heap.starts, piece);
    }
  }
}

BOOST_AUTO_TEST_CASE(bpe_merges_the_lowest_rank_first_and_takes_whole_pieces) {
  const Tokenizer t = small_tokenizer();
  BOOST_CHECK(t.encode_ordinary(" the") == std::vector<TokenId>{rank_of(t, " the")});
  // " andthe": no such token; "an" before "nd"... merges to " and" + "the".
  BOOST_CHECK(t.encode_ordinary(" andthe") == (std::vector<TokenId>{rank_of(t, " and"), rank_of(t, "the")}));
  BOOST_CHECK(t.encode_ordinary("hello") == std::vector<TokenId>{rank_of(t, "hello")});
  BOOST_CHECK(t.encode_ordinary("1234") == (std::vector<TokenId>{rank_of(t, "123"), '4'}));
  BOOST_CHECK(t.encode_ordinary("caf\xC3\xA9") == (std::vector<TokenId>{'c', 'a', 'f', rank_of(t, "\xC3\xA9")}));
  // "        " (8 spaces) before a word: 7 of them, then " w".
  BOOST_CHECK(t.encode_ordinary("        w") ==
              (std::vector<TokenId>{rank_of(t, "    "), rank_of(t, "  "), ' ', rank_of(t, " w")}));
  // A piece that is a token whole is that token, though no merge would reach it ("xyz"
  // has no "xy" nor "yz"), as tiktoken does.
  std::vector<std::string> ranked = ranked_from_merges(kMerges);
  ranked.push_back("xyz");
  const Tokenizer whole(ranked);
  BOOST_CHECK(whole.encode_ordinary("xyz") == std::vector<TokenId>{TokenId(ranked.size() - 1)});
  BOOST_CHECK(whole.encode_ordinary("xyzz") == (std::vector<TokenId>{'x', 'y', 'z', 'z'}));
}

BOOST_AUTO_TEST_CASE(bpe_encodes_as_the_plain_algorithm_does) {
  // A vocabulary grown from random text (each new token a pair of parts BPE left), then
  // random text encoded by the tokenizer and by reference_encode.
  std::mt19937 rng(9);
  std::vector<std::string> ranked = ranked_from_merges({});
  for (int grow = 0; grow < 1500; ++grow) {
    const Tokenizer current(ranked);
    const std::string sample = random_text(rng, 8);
    for (const std::string_view piece : gpt2_pieces(sample)) {
      const std::vector<TokenId> ids = current.encode_ordinary(piece);
      if (ids.size() < 2) continue;
      const std::size_t i = rng() % (ids.size() - 1);
      const std::string merged = std::string(current.token_bytes(ids[i])).append(current.token_bytes(ids[i + 1]));
      if (!current.find_token(merged)) ranked.push_back(merged);
      break;
    }
  }
  const Tokenizer t(ranked);
  std::map<std::string, TokenId, std::less<>> ranks;
  for (TokenId id = 0; id < ranked.size(); ++id) ranks.emplace(ranked[id], id);
  BOOST_TEST_MESSAGE(ranked.size() << " tokens");
  for (int i = 0; i < 3000; ++i) {
    const std::string text = random_text(rng, rng() % (i % 100 == 0 ? 400 : 40));
    const std::vector<TokenId> ids = t.encode_ordinary(text);
    BOOST_REQUIRE_MESSAGE(ids == reference_encode(ranks, text), quote_bytes(text));
    BOOST_REQUIRE(t.decode(ids) == text);
  }
  // A long text is cut for the pool: the same ids as its pieces encoded one by one, on
  // any number of threads.
  std::string long_text;
  while (long_text.size() < 1500000) long_text += random_text(rng, 1000);
  std::vector<TokenId> piece_by_piece;
  for (const std::string_view piece : gpt2_pieces(long_text)) t.encode_ordinary(piece, piece_by_piece);
  const int pool_threads = num_threads();
  for (const int n : {1, 2, 3}) {
    set_num_threads(n);
    BOOST_CHECK_MESSAGE(t.encode_ordinary(long_text) == piece_by_piece, n << " threads");
  }
  set_num_threads(pool_threads);

  // encode_ordinary into a vector appends; threads share a tokenizer.
  std::vector<TokenId> ids = {7};
  t.encode_ordinary("the", ids);
  BOOST_CHECK(ids.size() >= 2 && ids[0] == 7);
  const std::string text = random_text(rng, 20000);
  const std::vector<TokenId> expected = t.encode_ordinary(text);
  std::vector<std::vector<TokenId>> results(4);
  std::vector<std::thread> threads;
  for (auto& result : results) threads.emplace_back([&] { result = t.encode_ordinary(text); });
  for (auto& thread : threads) thread.join();
  for (const auto& result : results) BOOST_CHECK(result == expected);
}

// ---- Special tokens, decoding, construction, identity ---------------------------------

BOOST_AUTO_TEST_CASE(special_tokens_are_ids_only_when_allowed) {
  const Tokenizer t = small_tokenizer();
  const std::string text = "the<|endoftext|> the";
  const std::vector<TokenId> ordinary = t.encode_ordinary(text);
  BOOST_CHECK(std::find(ordinary.begin(), ordinary.end(), 280u) == ordinary.end());
  BOOST_CHECK_EQUAL(t.decode(ordinary), text);
  const std::vector<TokenId> expected = {rank_of(t, "the"), 280, rank_of(t, " the")};
  BOOST_CHECK(t.encode(text, AllowedSpecial::all()) == expected);
  BOOST_CHECK(t.encode(text, {"<|endoftext|>"}) == expected);
  BOOST_CHECK_EQUAL(t.decode(expected), text);
  // The stretches around a special token are encoded apart: " " stays a space.
  BOOST_CHECK(t.encode(" <|endoftext|>", AllowedSpecial::all()) == (std::vector<TokenId>{' ', 280}));
  BOOST_CHECK(t.encode("<|endoftext|><|endoftext|>", AllowedSpecial::all()) == (std::vector<TokenId>{280, 280}));
  BOOST_CHECK(t.encode("no special here", AllowedSpecial::none()) == t.encode_ordinary("no special here"));
  // Refused when held and not allowed: the token and where it is.
  check_error([&] { t.encode(text, AllowedSpecial::none()); }, {"encode", "<|endoftext|>", "at byte 3", "not allowed"});
  check_error([&] { t.encode("x<|endoftext|>", AllowedSpecial(std::vector<std::string>{})); }, {"at byte 1"});
  check_error([&] { t.encode("x", {"<|pad|>"}); }, {"encode", "\"<|pad|>\" is no special token", "<|endoftext|>"});

  // Several: only the disallowed one refuses; at one byte, the longer wins.
  const Tokenizer several(ranked_from_merges(kMerges), {{"<|a|>", 300}, {"<|a|>x", 301}, {"<|b|>", 302}});
  BOOST_CHECK(several.encode("<|a|>x<|a|>", {"<|a|>", "<|a|>x"}) == (std::vector<TokenId>{301, 300}));
  BOOST_CHECK(several.encode("<|a|>x<|b|>", AllowedSpecial::all()) == (std::vector<TokenId>{301, 302}));
  // A disallowed token refuses the text even where an allowed one overlaps it, as tiktoken.
  check_error([&] { several.encode("<|a|>x", {"<|a|>"}); }, {"\"<|a|>x\" at byte 0"});
  check_error([&] { several.encode("<|a|> <|b|>", {"<|a|>"}); }, {"\"<|b|>\" at byte 6"});
  BOOST_CHECK(several.find_special("<|b|>") == 302u);
  BOOST_CHECK(!several.find_special("<|c|>"));
  BOOST_CHECK_EQUAL(several.vocabulary_size(), 303u);
  BOOST_CHECK_EQUAL(several.rank_count(), 256u + kMerges.size());
}

BOOST_AUTO_TEST_CASE(decoding_an_id_that_is_no_token_is_an_error) {
  const Tokenizer t = small_tokenizer();  // ranks 0..279, special 280
  BOOST_CHECK_EQUAL(t.vocabulary_size(), 281u);
  BOOST_CHECK_EQUAL(t.decode(std::vector<TokenId>{'h', 'i', 280}), "hi<|endoftext|>");
  BOOST_CHECK_EQUAL(t.decode(std::vector<TokenId>{}), "");
  check_error(
      [&] {
        t.decode(std::vector<TokenId>{'a', 281});
      },
      {"decode", "token id 281", "past the vocabulary", "281"});
  check_error([&] { t.decode(std::vector<TokenId>{4000000000u}); }, {"decode", "4000000000", "size is 281"});
  check_error([&] { t.token_bytes(99999); }, {"decode", "99999"});
  const Tokenizer gap(ranked_from_merges({}), {{"<|end|>", 300}});  // ids 256..299 are no token
  check_error([&] { gap.decode(std::vector<TokenId>{256}); }, {"decode", "token id 256 is no token", "<|end|>", "301"});
  check_error([&] { gap.decode(std::vector<TokenId>{299}); }, {"token id 299 is no token"});
  BOOST_CHECK_EQUAL(gap.token_bytes(300), "<|end|>");
}

BOOST_AUTO_TEST_CASE(a_tokenizer_refuses_ranks_and_special_tokens_that_do_not_make_one) {
  std::vector<std::string> ranked = ranked_from_merges(kMerges);
  check_error([] { Tokenizer(std::vector<std::string>(255, "a")); }, {"Tokenizer", "255 tokens", "256 single bytes"});
  auto swapped = ranked;
  std::swap(swapped[10], swapped[256]);
  check_error([&] { Tokenizer{swapped}; }, {"Tokenizer", "rank 10 is \"th\"", "256 single bytes"});
  auto twice = ranked;
  twice.push_back("the");
  check_error([&] { Tokenizer{twice}; }, {"Tokenizer", "ranks 257 and 280", "\"the\""});
  auto empty = ranked;
  empty.push_back("");
  check_error([&] { Tokenizer{empty}; }, {"Tokenizer", "rank 280 is empty"});
  auto byte_twice = ranked;
  byte_twice[0] = "A";
  check_error([&] { Tokenizer{byte_twice}; }, {"Tokenizer", "ranks 0 and 65", "\"A\""});
  check_error([&] { Tokenizer(ranked, {{"<|e|>", 100}}); }, {"Tokenizer", "\"<|e|>\" has id 100", "start at 280"});
  check_error([&] { Tokenizer(ranked, {{"<|a|>", 300}, {"<|b|>", 300}}); }, {"Tokenizer", "both have id 300"});
  check_error([&] { Tokenizer(ranked, {{"<|a|>", 300}, {"<|a|>", 301}}); }, {"Tokenizer", "given twice", "300", "301"});
  check_error(
      [&] {
        Tokenizer(ranked, {{"the", 300}});
      },
      {"Tokenizer", "\"the\" is also the ordinary token of rank 257"});
  check_error([&] { Tokenizer(ranked, {{"", 300}}); }, {"Tokenizer", "special token 300 has an empty text"});
}

BOOST_AUTO_TEST_CASE(the_identity_is_the_ranks_and_the_special_tokens) {
  const Tokenizer a = small_tokenizer(), b = small_tokenizer();
  BOOST_CHECK_EQUAL(a.identity().size(), 64u);
  BOOST_CHECK(a.identity().find_first_not_of("0123456789abcdef") == std::string::npos);
  BOOST_CHECK_EQUAL(a.identity(), b.identity());
  const Tokenizer copy = a;
  BOOST_CHECK_EQUAL(copy.identity(), a.identity());
  std::vector<std::string> ranked = ranked_from_merges(kMerges);
  BOOST_CHECK_NE(Tokenizer(ranked).identity(), a.identity());                            // no special token
  BOOST_CHECK_NE(Tokenizer(ranked, {{"<|endoftext|>", 281}}).identity(), a.identity());  // another id
  BOOST_CHECK_NE(Tokenizer(ranked, {{"<|endoftext|]", 280}}).identity(), a.identity());  // another text
  std::swap(ranked[256], ranked[257]);
  BOOST_CHECK_NE(Tokenizer(ranked, {{"<|endoftext|>", 280}}).identity(), a.identity());  // two ranks swapped
  ranked = ranked_from_merges(kMerges);
  std::swap(ranked['a'], ranked['b']);
  BOOST_CHECK_NE(Tokenizer(ranked, {{"<|endoftext|>", 280}}).identity(), a.identity());  // two bytes swapped
}

// ---- Vocabulary files ----------------------------------------------------------------

namespace {

const Gpt2Vocabulary& small_files() {
  static const Gpt2Vocabulary files = format_gpt2_vocabulary(small_tokenizer());
  return files;
}

Tokenizer read_gpt2(std::string_view encoder, std::string_view merges) {
  return parse_gpt2_vocabulary({"encoder.json", encoder}, {"vocab.bpe", merges});
}

// encoder.json with one more entry at its end.
std::string with_entry(const std::string& encoder, std::string_view entry) {
  return encoder.substr(0, encoder.size() - 1) + ", " + std::string(entry) + "}";
}

std::string replaced(std::string text, std::string_view from, std::string_view to) {
  const std::size_t at = text.find(from);
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, "no " << from);
  return text.replace(at, from.size(), to);
}

// The lines of the small vocabulary's vocab.bpe with `edit` applied.
template <class Edit>
std::string merges_edited(Edit edit) {
  std::vector<std::string> lines;
  std::istringstream in(small_files().vocab_bpe);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  edit(lines);
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

}  // namespace

BOOST_AUTO_TEST_CASE(gpt2_files_are_written_and_read_back_the_same) {
  const Tokenizer t = small_tokenizer();
  const Gpt2Vocabulary& files = small_files();
  BOOST_CHECK(files.encoder_json.starts_with("{\"\\u0100\": 0, \"\\u0101\": 1, "));
  BOOST_CHECK(files.encoder_json.find("\"\\u0120the\": 258") != std::string::npos);
  BOOST_CHECK(files.encoder_json.ends_with(", \"<|endoftext|>\": 280}"));
  BOOST_CHECK(files.vocab_bpe.starts_with("#version: 0.2\nt h\nth e\n\u0120 the\n"));
  const Tokenizer back = read_gpt2(files.encoder_json, files.vocab_bpe);
  BOOST_CHECK_EQUAL(back.identity(), t.identity());
  const Gpt2Vocabulary again = format_gpt2_vocabulary(back);
  BOOST_CHECK(again.encoder_json == files.encoder_json && again.vocab_bpe == files.vocab_bpe);
  // Without the header line, and with encoder.json in another order and spacing.
  BOOST_CHECK_EQUAL(read_gpt2(files.encoder_json, files.vocab_bpe.substr(14)).identity(), t.identity());
  const nlohmann::json reordered = nlohmann::json::parse(files.encoder_json);  // sorted by key
  BOOST_CHECK_EQUAL(read_gpt2(reordered.dump(2), files.vocab_bpe).identity(), t.identity());
  // The merges written are BPE's cut over the lower ranks, whatever pair made the token.
  std::vector<std::string> ranked = ranked_from_merges({{"a", "b"}, {"b", "c"}, {"ab", "c"}});
  BOOST_CHECK(format_gpt2_vocabulary(Tokenizer(ranked)).vocab_bpe == "#version: 0.2\na b\nb c\nab c\n");
}

BOOST_AUTO_TEST_CASE(tiktoken_files_are_written_and_read_back_the_same) {
  const Tokenizer t = small_tokenizer();
  const std::string ranks = format_tiktoken_ranks(t);
  BOOST_CHECK(ranks.starts_with("AA== 0\nAQ== 1\n"));
  BOOST_CHECK(ranks.find("\nIHRoZQ== 258\n") != std::string::npos);  // " the"
  const Tokenizer back = parse_tiktoken_ranks({"gpt2.tiktoken", ranks}, {{"<|endoftext|>", 280}});
  BOOST_CHECK_EQUAL(back.identity(), t.identity());
  BOOST_CHECK_EQUAL(format_tiktoken_ranks(back), ranks);
  // Lines in any order; ranks are what count.
  std::vector<std::string> lines;
  std::istringstream in(ranks);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::reverse(lines.begin(), lines.end());
  std::string reversed;
  for (const std::string& line : lines) reversed += line + "\n";
  BOOST_CHECK_EQUAL(parse_tiktoken_ranks({"r", reversed}, {{"<|endoftext|>", 280}}).identity(), t.identity());
  // Every length of token through base64's padding.
  std::vector<std::string> ranked = ranked_from_merges({{"a", "b"}, {"ab", "c"}, {"abc", "d"}, {"abcd", "\xFF"}});
  const Tokenizer padded(ranked);
  BOOST_CHECK_EQUAL(parse_tiktoken_ranks({"r", format_tiktoken_ranks(padded)}).identity(), padded.identity());
}

BOOST_AUTO_TEST_CASE(writing_refuses_what_gpt2s_format_cannot_hold) {
  // "abc" with no "ab" nor "bc" below it: BPE cuts it into three parts, no merge.
  std::vector<std::string> ranked = ranked_from_merges({});
  ranked.push_back("abc");
  check_error([&] { format_gpt2_vocabulary(Tokenizer(ranked)); },
              {"format_gpt2_vocabulary", "rank 256", "\"abc\"", "3 parts", "tiktoken"});
  // A special token that is two tokens end to end would read back as a missing merge.
  check_error(
      [&] {
        format_gpt2_vocabulary(Tokenizer(ranked_from_merges(kMerges), {{"the<", 300}}));
      },
      {"format_gpt2_vocabulary", "\"the<\"", "two ordinary tokens"});
  BOOST_CHECK_NO_THROW(format_tiktoken_ranks(Tokenizer(ranked)));
}

BOOST_AUTO_TEST_CASE(encoder_json_that_is_no_json_object_of_ids_is_refused) {
  const std::string& merges = small_files().vocab_bpe;
  for (const std::string bad :
       {"", "{", "{\"a\": 1", "{\"a\": 1,", "{\"a\": 1, }", "{'a': 1}", "{\"a\" 1}", "{\"a\": 1} x", "{\"a\": 1}{}"})
    BOOST_TEST_CONTEXT(bad) {
      check_error([&] { read_gpt2(bad, merges); }, {"encoder.json: not valid JSON"});
    }
  // Cut short anywhere: the end of the JSON is missing.
  const std::string& encoder = small_files().encoder_json;
  for (const std::size_t cut : {std::size_t{1}, std::size_t{17}, encoder.size() / 2, encoder.size() - 1})
    check_error([&] { read_gpt2(encoder.substr(0, cut), merges); }, {"encoder.json: not valid JSON", "cut short"});
  for (const auto& [bad, says] : std::vector<std::pair<std::string, std::string>>{
           {"[1, 2]", "not a JSON object"},
           {"5", "not a JSON object"},
           {"\"!\"", "not a JSON object"},
           {"{\"!\": \"0\"}", "the value of token \"!\" is the string \"0\", not an id"},
           {"{\"!\": 1.5}", "1.5, not a whole number"},
           {"{\"!\": -1}", "-1, a negative number"},
           {"{\"!\": 4294967295}", "past 32 bits"},
           {"{\"!\": null}", "null, not an id"},
           {"{\"!\": true}", "true, not an id"},
           {"{\"!\": {}}", "an object, not an id"},
           {"{\"!\": [0]}", "an array, not an id"}})
    BOOST_TEST_CONTEXT(bad) {
      check_error([&] { read_gpt2(bad, merges); }, {"encoder.json", says});
    }
}

BOOST_AUTO_TEST_CASE(tokens_outside_the_byte_alphabet_are_refused) {
  const Gpt2Vocabulary& files = small_files();
  for (const auto& [key, says] : std::vector<std::pair<std::string, std::string>>{{"a b", "U+0020 \" \""},
                                                                                  {"\\u00a0", "U+00A0"},
                                                                                  {"x\\u0144", "U+0144"},
                                                                                  {"\\u4f60", "U+4F60"},
                                                                                  {"\\ud83d\\ude00", "U+1F600"},
                                                                                  {"\\n", "U+000A"}}) {
    const std::string encoder = replaced(files.encoder_json, "\"<|endoftext|>\"", "\"" + key + "\"");
    BOOST_TEST_CONTEXT(key) {
      check_error([&] { read_gpt2(encoder, files.vocab_bpe); }, {"encoder.json: token", says, "alphabet"});
    }
  }
  check_error([&] { read_gpt2(files.encoder_json, replaced(files.vocab_bpe, "\nt h\n", "\nt \xC3\xB0\xC2\xA0\n")); },
              {"vocab.bpe: line 2: token", "U+00A0", "alphabet"});
  check_error([&] { read_gpt2(files.encoder_json, replaced(files.vocab_bpe, "\nt h\n", "\nt\xFF h\n")); },
              {"vocab.bpe: line 2", "0xFF, which is not UTF-8"});
}

BOOST_AUTO_TEST_CASE(duplicate_tokens_and_ids_are_refused) {
  const Gpt2Vocabulary& files = small_files();
  // encoder.json: a key twice (JSON allows it; a vocabulary does not), an id twice.
  check_error([&] { read_gpt2(with_entry(files.encoder_json, "\"the\": 300"), files.vocab_bpe); },
              {"encoder.json", "token \"the\" is given twice, with ids 257 and 300"});
  check_error(
      [&] {
        read_gpt2(replaced(files.encoder_json, "\"<|endoftext|>\": 280", "\"<|endoftext|>\": 279"), files.vocab_bpe);
      },
      {"encoder.json", "both have id 279"});
  check_error([&] { read_gpt2(replaced(files.encoder_json, "\"!\": 33", "\"!\": 0"), files.vocab_bpe); },
              {"encoder.json", "both have id 0"});
  // vocab.bpe: a merge twice; tiktoken: a token twice, a rank twice.
  check_error(
      [&] {
        read_gpt2(files.encoder_json, merges_edited([](auto& lines) { lines.insert(lines.begin() + 3, "t h"); }));
      },
      {"vocab.bpe", "line 4 makes \"th\", which line 2 made already"});
  const std::string ranks = format_tiktoken_ranks(small_tokenizer());
  check_error(
      [&] {
        parse_tiktoken_ranks({"r.tiktoken", ranks + "dGhl 300\n"});
      },
      {"r.tiktoken", "line 281: token \"the\" is line 258's too"});
  check_error(
      [&] {
        parse_tiktoken_ranks({"r.tiktoken", replaced(ranks, "IHRoZQ== 258", "IHRoZQ== 257")});
      },
      {"r.tiktoken", "rank 257 is line 258's too"});
  check_error(
      [&] {
        parse_tiktoken_ranks({"r.tiktoken", replaced(ranks, "AA== 0\n", "AA== 0\nAA== 300\n")});
      },
      {"r.tiktoken", "line 2: token \"\\x00\" is line 1's too"});
}

BOOST_AUTO_TEST_CASE(missing_single_bytes_are_refused) {
  const Gpt2Vocabulary& files = small_files();
  check_error([&] { read_gpt2(replaced(files.encoder_json, "\"!\": 33, ", ""), files.vocab_bpe); },
              {"encoder.json", "the single bytes 0x21 \"!\" are missing (1 of the 256)"});
  std::string several = replaced(files.encoder_json, "\"\\u0100\": 0, ", "");
  several = replaced(several, "\"\\u0120\": 32, ", "");
  several = replaced(several, "\"\\u00ff\": 255, ", "");
  check_error([&] { read_gpt2(several, files.vocab_bpe); },
              {"encoder.json", "0x00 \"\xC4\x80\", 0x20 \"\xC4\xA0\", 0xFF \"\xC3\xBF\" are missing (3 of the 256)"});
  check_error(
      [&] { read_gpt2(with_entry(replaced(files.encoder_json, "\"!\": 33, ", ""), "\"!\": 300"), files.vocab_bpe); },
      {"encoder.json", "the single byte 0x21 (token \"!\") has id 300", "ids 0 to 255"});
  const std::string ranks = format_tiktoken_ranks(small_tokenizer());
  check_error(
      [&] {
        parse_tiktoken_ranks({"r.tiktoken", replaced(ranks, "IQ== 33\n", "")});
      },
      {"r.tiktoken", "rank 33 is missing"});
  std::string without = ranks;
  for (const std::string line : {"AA== 0\n", "IQ== 33\n", "/w== 255\n"}) without = replaced(without, line, "");
  without = replaced(without, "dGg= 256", "dGg= 0");
  without = replaced(without, "dGhl 257", "dGhl 33");
  without = replaced(without, "IHRoZQ== 258", "IHRoZQ== 255");
  check_error([&] { parse_tiktoken_ranks({"r.tiktoken", without}); }, {"r.tiktoken", "rank 256 is missing"});
  check_error(
      [&] {
        parse_tiktoken_ranks({"r.tiktoken", "QQ== 0\n"});
      },
      {"r.tiktoken", "the single bytes 0x00, 0x01", "are missing (255 of the 256)"});
  check_error(
      [&] {
        parse_tiktoken_ranks({"r.tiktoken", replaced(replaced(ranks, "dGg= 256", "dGg= 65"), "QQ== 65", "QQ== 256")});
      },
      {"r.tiktoken", "line 257: rank 65 is \"th\", not a single byte"});
}

BOOST_AUTO_TEST_CASE(merges_naming_unknown_tokens_or_making_the_wrong_one_are_refused) {
  const Gpt2Vocabulary& files = small_files();
  // "th e" before "t h": "th" is no token yet.
  check_error([&] { read_gpt2(files.encoder_json, merges_edited([](auto& lines) { std::swap(lines[1], lines[2]); })); },
              {"vocab.bpe", "line 2 merges \"th\", which is no token yet"});
  check_error([&] { read_gpt2(files.encoder_json, merges_edited([](auto& lines) { lines[5] = "an xyz"; })); },
              {"vocab.bpe", "line 6 merges \"xyz\", which is no token yet"});
  check_error([&] { read_gpt2(files.encoder_json, merges_edited([](auto& lines) { lines[4] = "q z"; })); },
              {"vocab.bpe", "line 5 makes \"qz\", which encoder.json lacks"});
  // Two lines swapped whose tokens exist either way: the ids then disagree with the order.
  check_error([&] { read_gpt2(files.encoder_json, merges_edited([](auto& lines) { std::swap(lines[4], lines[7]); })); },
              {"vocab.bpe", "line 5 makes \"in\", which has id 262 in encoder.json", "must make the token of id 259"});
  check_error([&] { read_gpt2(replaced(files.encoder_json, "\"th\": 256", "\"th\": 290"), files.vocab_bpe); },
              {"vocab.bpe", "line 2 makes \"th\", which has id 290"});
}

BOOST_AUTO_TEST_CASE(badly_formed_or_cut_merges_and_rank_files_are_refused) {
  const Gpt2Vocabulary& files = small_files();
  for (const auto& [line, says] : std::vector<std::pair<std::string, std::string>>{
           {"th", "line 3 is \"th\": a merge is two tokens with one space"},
           {"t  h", "line 3 is \"t  h\""},
           {"", "line 3 is \"\""},
           {" th", "line 3 is \" th\""},
           {"t h e", "line 3 is \"t h e\""},
           {"th e\r", "line 3: token \"e\\x0D\" holds U+000D"}})
    BOOST_TEST_CONTEXT(line) {
      check_error([&] { read_gpt2(files.encoder_json, merges_edited([&](auto& lines) { lines[2] = line; })); },
                  {"vocab.bpe", says});
    }
  check_error([&] { read_gpt2(files.encoder_json, replaced(files.vocab_bpe, "#version: 0.2", "#version: 0.3")); },
              {"vocab.bpe", "line 1 is \"#version: 0.3\"", "#version: 0.2"});
  // Cut mid-line (no newline at the end) or at a line's end (merges missing).
  const std::string& merges = files.vocab_bpe;
  for (const std::size_t cut : {merges.size() - 1, merges.size() - 3, std::size_t{20}})
    check_error([&] { read_gpt2(files.encoder_json, merges.substr(0, cut)); },
                {"vocab.bpe: line", "has no newline at its end (a file cut short?)"});
  const std::string cut_at_line = merges.substr(0, merges.find("\nll o\n") + 1);
  check_error(
      [&] { read_gpt2(files.encoder_json, cut_at_line); },
      {"encoder.json: token \"llo\" (id 271) is made by no merge of vocab.bpe, yet it is \"ll\" + \"o\"", "cut short"});

  const std::string ranks = format_tiktoken_ranks(small_tokenizer());
  for (const auto& [bad, says] : std::vector<std::pair<std::string, std::string>>{
           {"dGhl", "line 258 is \"dGhl\": a line is a token's bytes in base64, a space and its rank"},
           {"dGhl x", "line 258: the rank \"x\" is not a whole number"},
           {"dGhl -1", "the rank \"-1\""},
           {"dGhl 1.0", "the rank \"1.0\""},
           {"dGhl 99999999999", "the rank \"99999999999\""},
           {"dGh 257", "\"dGh\" is not base64"},
           {"dG=l 257", "\"dG=l\" is not base64"},
           {"dGhl= 257", "\"dGhl=\" is not base64"},
           {"dGh! 257", "\"dGh!\" is not base64"},
           {"dGi= 257", "\"dGi=\" is not base64"},  // stray bits
           {" 257", "line 258 holds an empty token"},
           {"dGhl 257 ", "the rank \"257 \""}})
    BOOST_TEST_CONTEXT(bad) {
      check_error(
          [&] {
            parse_tiktoken_ranks({"r.tiktoken", replaced(ranks, "dGhl 257", bad)});
          },
          {"r.tiktoken", says});
    }
  check_error(
      [&] {
        parse_tiktoken_ranks({"r.tiktoken", ranks.substr(0, ranks.size() - 2)});
      },
      {"r.tiktoken", "line 280 has no newline at its end (a file cut short?)"});
  check_error(
      [&] {
        parse_tiktoken_ranks({"r.tiktoken", replaced(ranks, "IHRoZQ== 258", "IHRoZQ== 900")});
      },
      {"r.tiktoken", "rank 258 is missing, and line 259 has rank 900", "0 to 279 without a gap"});
}
