#include "xgrad/text/vocabulary_files.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <optional>
#include <unordered_map>

#include "xgrad/autograd/error.hpp"
#include "xgrad/text/byte_symbols.hpp"
#include "xgrad/text/detail/merge.hpp"
#include "xgrad/text/utf8.hpp"

namespace xgrad::text {

namespace {

std::string hex_byte(unsigned char byte) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02X", byte);
  return text;
}

// Why `symbols` is no token of GPT-2's alphabet: its first character outside it.
std::string outside_alphabet(std::string_view symbols) {
  for (std::size_t pos = 0; pos < symbols.size();) {
    const Utf8Char c = read_utf8(symbols, pos);
    if (c.code_point == kInvalidByte)
      return str("the byte ", hex_byte(static_cast<unsigned char>(symbols[pos])), ", which is not UTF-8");
    if (!symbol_to_byte(c.code_point))
      return str(code_point_label(c.code_point), " ", quote_bytes(symbols.substr(pos, c.length)),
                 ", a character outside GPT-2's byte alphabet");
    pos += c.length;
  }
  return "nothing wrong";  // not reached: called for text that does not decode
}

// The lines of a text file without their newlines; every line must have one.
std::vector<std::string_view> lines_of(FileBytes file) {
  std::vector<std::string_view> lines;
  for (std::size_t pos = 0; pos < file.bytes.size();) {
    const std::size_t end = file.bytes.find('\n', pos);
    XGRAD_CHECK(end != std::string_view::npos, file.name, "line ", lines.size() + 1,
                " has no newline at its end (a file cut short?)");
    lines.push_back(file.bytes.substr(pos, end - pos));
    pos = end + 1;
  }
  return lines;
}

// Whether `bytes` is two tokens end to end, as `is_token` tells: the first such split.
template <class IsToken>
std::optional<std::size_t> two_tokens_at(std::string_view bytes, const IsToken& is_token) {
  for (std::size_t cut = 1; cut < bytes.size(); ++cut)
    if (is_token(bytes.substr(0, cut)) && is_token(bytes.substr(cut))) return cut;
  return std::nullopt;
}

// ---- encoder.json -------------------------------------------------------------------

struct EncoderEntry {
  std::string symbols;  // as the file writes the token
  std::string bytes;
  TokenId id;
};

// Reads encoder.json's object event by event: each key a token, each value its id.
class EncoderReader : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit EncoderReader(FileBytes file) : file_(file) {}
  std::vector<EncoderEntry> entries;

  bool null() override { not_an_id("null"); }
  bool boolean(bool value) override { not_an_id(value ? "true" : "false"); }
  bool number_integer(number_integer_t value) override {
    if (value < 0) not_an_id(str(value, ", a negative number"));
    return number_unsigned(static_cast<number_unsigned_t>(value));
  }
  bool number_unsigned(number_unsigned_t value) override {
    if (depth_ != 1) not_an_object();
    if (value >= detail::kNoRank) not_an_id(str(value, ", past 32 bits"));
    const auto bytes = symbols_to_bytes(key_);
    XGRAD_CHECK(bytes, file_.name, "token ", quote_bytes(key_), " holds ", outside_alphabet(key_));
    entries.push_back({key_, *bytes, static_cast<TokenId>(value)});
    return true;
  }
  bool number_float(number_float_t, const string_t& text) override { not_an_id(text + ", not a whole number"); }
  bool string(string_t& value) override { not_an_id("the string " + quote_bytes(value)); }
  bool binary(binary_t&) override { not_an_id("binary data"); }
  bool start_object(std::size_t) override {
    if (depth_ != 0) not_an_id("an object");
    depth_ = 1;
    return true;
  }
  bool key(string_t& value) override {
    key_ = value;
    return true;
  }
  bool end_object() override {
    depth_ = 2;  // the object is complete: anything after it is not one object
    return true;
  }
  bool start_array(std::size_t) override {
    if (depth_ != 1) not_an_object();
    not_an_id("an array");
  }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& error) override {
    std::string what = error.what();
    if (const std::size_t end = what.find("] "); what.starts_with("[json.exception") && end != std::string::npos)
      what.erase(0, end + 2);
    const bool cut_short = position >= file_.bytes.size();
    fail(file_.name, "not valid JSON: ", what, cut_short ? " (a file cut short?)" : "");
  }

 private:
  [[noreturn]] void not_an_id(const std::string& value) {
    if (depth_ != 1) not_an_object();
    fail(file_.name, "the value of token ", quote_bytes(key_), " is ", value, ", not an id");
  }
  [[noreturn]] void not_an_object() {
    fail(file_.name, "not a JSON object of tokens and their ids (as GPT-2's encoder.json is)");
  }

  FileBytes file_;
  int depth_ = 0;  // 0: before the object, 1: inside it, 2: after it
  std::string key_;
};

std::vector<EncoderEntry> read_encoder_json(FileBytes file) {
  EncoderReader reader(file);
  nlohmann::json::sax_parse(file.bytes, &reader);
  return std::move(reader.entries);
}

// JSON as Python's json.dumps writes it (ensure_ascii): what GPT-2's encoder.json is.
void append_json_string(std::string& out, std::string_view utf8) {
  out += '"';
  for (std::size_t pos = 0; pos < utf8.size();) {
    const Utf8Char c = read_utf8(utf8, pos);
    pos += c.length;
    char escaped[16];
    if (c.code_point == '"' || c.code_point == '\\') {
      out += '\\';
      out += static_cast<char>(c.code_point);
    } else if (c.code_point >= 0x20 && c.code_point < 0x7F) {
      out += static_cast<char>(c.code_point);
    } else if (c.code_point < 0x10000) {
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c.code_point));
      out += escaped;
    } else {  // a surrogate pair
      const char32_t v = c.code_point - 0x10000;
      std::snprintf(escaped, sizeof escaped, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                    static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      out += escaped;
    }
  }
  out += '"';
}

// ---- vocab.bpe ----------------------------------------------------------------------

constexpr std::string_view kMergesHeader = "#version: 0.2";

// One side of a merge, as bytes.
std::string merge_side(FileBytes file, std::size_t line, std::string_view symbols) {
  const auto bytes = symbols_to_bytes(symbols);
  XGRAD_CHECK(bytes, file.name, "line ", line, ": token ", quote_bytes(symbols), " holds ", outside_alphabet(symbols));
  return *bytes;
}

// The two tokens of rank < `rank` that BPE over the lower ranks cuts the token of `rank`
// into: its merge in vocab.bpe.
std::pair<std::string_view, std::string_view> merge_of(const Tokenizer& tokenizer, TokenId rank,
                                                       detail::MergeScratch& scratch) {
  const std::string_view bytes = tokenizer.token_bytes(rank);
  const auto rank_below = [&](std::string_view part) {
    const auto id = tokenizer.find_token(part);
    return id && *id < rank ? *id : detail::kNoRank;
  };
  detail::byte_pair_merge(bytes, rank_below, scratch);
  const auto& starts = scratch.starts;
  XGRAD_CHECK(starts.size() == 3, "format_gpt2_vocabulary", "the token of rank ", rank, ", ", quote_bytes(bytes),
              ", is not two lower-ranked tokens merged: BPE over the ranks below it cuts it into ", starts.size() - 1,
              " parts, so vocab.bpe cannot hold it (tiktoken's format can)");
  return {bytes.substr(0, starts[1]), bytes.substr(starts[1])};
}

// ---- reading GPT-2's pair -------------------------------------------------------------

// encoder.json's entries by bytes and by id, each bytes and each id once.
struct EncoderIndex {
  std::unordered_map<std::string_view, const EncoderEntry*> by_bytes;
  std::vector<const EncoderEntry*> by_id;  // in id order
};

EncoderIndex index_encoder(FileBytes encoder, const std::vector<EncoderEntry>& entries) {
  EncoderIndex index;
  for (const EncoderEntry& entry : entries) {
    XGRAD_CHECK(!entry.bytes.empty(), encoder.name, "an empty token (id ", entry.id, ")");
    const auto [it, added] = index.by_bytes.emplace(entry.bytes, &entry);
    XGRAD_CHECK(added, encoder.name, "token ", quote_bytes(entry.symbols), " is given twice, with ids ", it->second->id,
                " and ", entry.id);
    index.by_id.push_back(&entry);
  }
  auto& by_id = index.by_id;
  std::sort(by_id.begin(), by_id.end(), [](const auto* a, const auto* b) { return a->id < b->id; });
  for (std::size_t i = 1; i < by_id.size(); ++i)
    XGRAD_CHECK(by_id[i - 1]->id != by_id[i]->id, encoder.name, "tokens ", quote_bytes(by_id[i - 1]->symbols), " and ",
                quote_bytes(by_id[i]->symbols), " both have id ", by_id[i]->id);
  return index;
}

// The 256 single bytes are there, with ids 0 to 255.
void check_single_bytes(FileBytes encoder, const EncoderIndex& index) {
  std::vector<std::string> missing;
  for (unsigned byte = 0; byte < 256; ++byte) {
    const std::string single(1, static_cast<char>(byte));
    const auto it = index.by_bytes.find(single);
    if (it == index.by_bytes.end()) {
      missing.push_back(str(hex_byte(static_cast<unsigned char>(byte)), " ", quote_bytes(bytes_to_symbols(single))));
      continue;
    }
    XGRAD_CHECK(it->second->id < 256, encoder.name, "the single byte ", hex_byte(static_cast<unsigned char>(byte)),
                " (token ", quote_bytes(it->second->symbols), ") has id ", it->second->id,
                ": the 256 single bytes must have ids 0 to 255");
  }
  XGRAD_CHECK(missing.empty(), encoder.name, "the single bytes ", listed(missing), " are missing (", missing.size(),
              " of the 256)");
}

// What vocab.bpe's merges make: the ranked tokens (the single bytes at their ids, merge i's
// result at 256 + i) and where each result is made.
struct Merges {
  std::vector<std::string> ranked;
  std::unordered_map<std::string_view, std::size_t> made_at;  // a merge's result: its line
  bool is_token(std::string_view bytes) const { return bytes.size() == 1 || made_at.contains(bytes); }
};

Merges read_merges(FileBytes vocab_bpe, FileBytes encoder, const EncoderIndex& index) {
  const std::vector<std::string_view> lines = lines_of(vocab_bpe);
  std::size_t first_merge = 0;  // the lines before it: the header
  if (!lines.empty() && lines[0].starts_with("#version")) {
    XGRAD_CHECK(lines[0].starts_with(kMergesHeader), vocab_bpe.name, "line 1 is ", quote_bytes(lines[0]),
                ": the header known is \"", kMergesHeader, "\"");
    first_merge = 1;
  }
  const std::size_t count = lines.size() - first_merge;
  Merges merges;
  merges.ranked.resize(256 + count);
  for (unsigned byte = 0; byte < 256; ++byte) {
    const std::string single(1, static_cast<char>(byte));
    merges.ranked[index.by_bytes.at(single)->id] = single;
  }
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t line = first_merge + i + 1;
    const std::string_view text = lines[first_merge + i];
    const std::size_t space = text.find(' ');
    XGRAD_CHECK(space != std::string_view::npos && space > 0 && space + 1 < text.size() &&
                    text.find(' ', space + 1) == std::string_view::npos,
                vocab_bpe.name, "line ", line, " is ", quote_bytes(text),
                ": a merge is two tokens with one space between them");
    const std::string left = merge_side(vocab_bpe, line, text.substr(0, space));
    const std::string right = merge_side(vocab_bpe, line, text.substr(space + 1));
    for (const std::string& side : {left, right})
      XGRAD_CHECK(merges.is_token(side), vocab_bpe.name, "line ", line, " merges ", quote_bytes(bytes_to_symbols(side)),
                  ", which is no token yet (neither a single byte nor an earlier line's result)");
    const std::string result = left + right;
    const std::string result_symbols = bytes_to_symbols(result);
    if (const auto made = merges.made_at.find(result); made != merges.made_at.end())
      fail(vocab_bpe.name, "line ", line, " makes ", quote_bytes(result_symbols), ", which line ", made->second,
           " made already");
    const auto entry = index.by_bytes.find(result);
    XGRAD_CHECK(entry != index.by_bytes.end(), vocab_bpe.name, "line ", line, " makes ", quote_bytes(result_symbols),
                ", which ", encoder.name, " lacks");
    XGRAD_CHECK(entry->second->id == 256 + i, vocab_bpe.name, "line ", line, " makes ", quote_bytes(result_symbols),
                ", which has id ", entry->second->id, " in ", encoder.name, ": merge ", i,
                " (counting from 0) must make the token of id ", 256 + i);
    merges.made_at.emplace(entry->second->bytes, line);
    merges.ranked[256 + i] = result;
  }
  return merges;
}

// encoder.json's entries no merge makes: the special tokens. One that is two tokens end to
// end is a merge vocab.bpe lacks (a file cut short at a line's end), not a special token.
std::vector<SpecialToken> special_tokens_left(FileBytes encoder, FileBytes vocab_bpe, const EncoderIndex& index,
                                              const Merges& merges) {
  const auto is_token = [&](std::string_view bytes) { return merges.is_token(bytes); };
  std::vector<SpecialToken> specials;
  for (const EncoderEntry* entry : index.by_id) {
    if (is_token(entry->bytes)) continue;
    const auto cut = two_tokens_at(entry->bytes, is_token);
    XGRAD_CHECK(!cut, encoder.name, "token ", quote_bytes(entry->symbols), " (id ", entry->id,
                ") is made by no merge of ", vocab_bpe.name, ", yet it is ",
                quote_bytes(bytes_to_symbols(entry->bytes.substr(0, *cut))), " + ",
                quote_bytes(bytes_to_symbols(entry->bytes.substr(*cut))), ", two tokens: ", vocab_bpe.name,
                " lacks its merge (a file cut short?)");
    specials.push_back({entry->bytes, entry->id});
  }
  return specials;
}

// ---- tiktoken -----------------------------------------------------------------------

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Strict base64: the standard alphabet, padded with '=' to a multiple of 4, no stray bits.
std::optional<std::string> decode_base64(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string bytes;
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const int padding = last && text[i + 3] == '=' ? (text[i + 2] == '=' ? 2 : 1) : 0;
    std::uint32_t group = 0;
    for (int k = 0; k < 4; ++k) {
      const int value = k >= 4 - padding ? 0 : base64_value(text[i + k]);
      if (value < 0) return std::nullopt;
      group = (group << 6) | static_cast<std::uint32_t>(value);
    }
    const int kept = 3 - padding;
    if (padding && (group & ((1u << (8 * padding)) - 1)) != 0) return std::nullopt;  // stray bits
    for (int k = 0; k < kept; ++k) bytes += static_cast<char>((group >> (16 - 8 * k)) & 0xFF);
  }
  return bytes;
}

std::string encode_base64(std::string_view bytes) {
  std::string text;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    std::uint32_t group = 0;
    for (std::size_t k = 0; k < 3; ++k) group = (group << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (std::size_t k = 0; k < 4; ++k) text += k <= n ? kBase64[(group >> (18 - 6 * k)) & 63] : '=';
  }
  return text;
}

std::optional<TokenId> parse_rank(std::string_view text) {
  TokenId rank = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), rank);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || rank == detail::kNoRank)
    return std::nullopt;
  return rank;
}

}  // namespace

Tokenizer parse_gpt2_vocabulary(FileBytes encoder_json, FileBytes vocab_bpe) {
  const std::vector<EncoderEntry> entries = read_encoder_json(encoder_json);
  const EncoderIndex index = index_encoder(encoder_json, entries);
  check_single_bytes(encoder_json, index);
  Merges merges = read_merges(vocab_bpe, encoder_json, index);
  std::vector<SpecialToken> specials = special_tokens_left(encoder_json, vocab_bpe, index, merges);
  return Tokenizer(std::move(merges.ranked), std::move(specials));
}

Gpt2Vocabulary format_gpt2_vocabulary(const Tokenizer& tokenizer) {
  const auto is_token = [&](std::string_view bytes) { return tokenizer.find_token(bytes).has_value(); };
  for (const SpecialToken& special : tokenizer.special_tokens())
    XGRAD_CHECK(!two_tokens_at(special.text, is_token), "format_gpt2_vocabulary", "special token ",
                quote_bytes(special.text),
                " is two ordinary tokens end to end, which encoder.json would read as a merge vocab.bpe lacks "
                "(tiktoken's format, which keeps special tokens apart, can hold it)");
  Gpt2Vocabulary files;
  std::string& json = files.encoder_json;
  json = "{";
  const auto add_entry = [&](std::string_view bytes, TokenId id) {
    if (json.size() > 1) json += ", ";
    append_json_string(json, bytes_to_symbols(bytes));
    json += ": " + std::to_string(id);
  };
  for (TokenId rank = 0; rank < tokenizer.rank_count(); ++rank) add_entry(tokenizer.token_bytes(rank), rank);
  for (const SpecialToken& special : tokenizer.special_tokens()) add_entry(special.text, special.id);
  json += "}";

  files.vocab_bpe = std::string(kMergesHeader) + "\n";
  detail::MergeScratch scratch;
  for (auto rank = TokenId{256}; rank < tokenizer.rank_count(); ++rank) {
    const auto [left, right] = merge_of(tokenizer, rank, scratch);
    files.vocab_bpe += bytes_to_symbols(left) + " " + bytes_to_symbols(right) + "\n";
  }
  return files;
}

Tokenizer parse_tiktoken_ranks(FileBytes file, std::vector<SpecialToken> special_tokens) {
  const std::vector<std::string_view> lines = lines_of(file);
  const std::size_t n = lines.size();
  std::vector<std::string> ranked(n);
  std::vector<std::size_t> line_of_rank(n, 0);  // 0: no line yet
  std::unordered_map<std::string, std::size_t> line_of_token;
  std::optional<std::pair<TokenId, std::size_t>> past_end;  // a rank >= n and its line
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t line = i + 1;
    const std::string_view text = lines[i];
    const std::size_t space = text.find(' ');
    XGRAD_CHECK(space != std::string_view::npos, file.name, "line ", line, " is ", quote_bytes(text),
                ": a line is a token's bytes in base64, a space and its rank");
    const auto bytes = decode_base64(text.substr(0, space));
    XGRAD_CHECK(bytes, file.name, "line ", line, ": ", quote_bytes(text.substr(0, space)),
                " is not base64 (the standard alphabet, padded with '=' to a multiple of 4 characters)");
    XGRAD_CHECK(!bytes->empty(), file.name, "line ", line, " holds an empty token");
    const auto rank = parse_rank(text.substr(space + 1));
    XGRAD_CHECK(rank, file.name, "line ", line, ": the rank ", quote_bytes(text.substr(space + 1)),
                " is not a whole number below 2^32 - 1");
    const auto [earlier, added] = line_of_token.emplace(*bytes, line);
    XGRAD_CHECK(added, file.name, "line ", line, ": token ", quote_bytes(*bytes), " is line ", earlier->second,
                "'s too");
    if (*rank >= n) {
      if (!past_end) past_end = {*rank, line};
      continue;
    }
    XGRAD_CHECK(line_of_rank[*rank] == 0, file.name, "line ", line, ": rank ", *rank, " is line ", line_of_rank[*rank],
                "'s too");
    line_of_rank[*rank] = line;
    ranked[*rank] = *bytes;
  }
  if (past_end) {
    const auto gap = std::find(line_of_rank.begin(), line_of_rank.end(), 0) - line_of_rank.begin();
    fail(file.name, "rank ", gap, " is missing, and line ", past_end->second, " has rank ", past_end->first,
         ": the ranks of ", n, " tokens run from 0 to ", n - 1, " without a gap");
  }
  std::vector<std::string> missing;
  for (unsigned byte = 0; byte < 256; ++byte)
    if (!line_of_token.contains(std::string(1, static_cast<char>(byte))))
      missing.push_back(hex_byte(static_cast<unsigned char>(byte)));
  XGRAD_CHECK(missing.empty(), file.name, "the single bytes ", listed(missing), " are missing (", missing.size(),
              " of the 256)");
  for (TokenId rank = 0; rank < 256; ++rank)
    XGRAD_CHECK(ranked[rank].size() == 1, file.name, "line ", line_of_rank[rank], ": rank ", rank, " is ",
                quote_bytes(ranked[rank]), ", not a single byte: ranks 0 to 255 must be the 256 single bytes");
  return Tokenizer(std::move(ranked), std::move(special_tokens));
}

std::string format_tiktoken_ranks(const Tokenizer& tokenizer) {
  std::string text;
  for (TokenId rank = 0; rank < tokenizer.rank_count(); ++rank)
    text += encode_base64(tokenizer.token_bytes(rank)) + " " + std::to_string(rank) + "\n";
  return text;
}

}  // namespace xgrad::text
