#include "xgrad/text/byte_symbols.hpp"

#include <array>

#include "xgrad/text/utf8.hpp"

namespace xgrad::text {

namespace {

constexpr bool stands_for_itself(unsigned byte) {
  return (byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || (byte >= 174 && byte <= 255);
}

constexpr std::array<char32_t, 256> kSymbols = [] {
  std::array<char32_t, 256> symbols{};
  char32_t next = 0x100;
  for (unsigned byte = 0; byte < 256; ++byte) symbols[byte] = stands_for_itself(byte) ? byte : next++;
  return symbols;
}();

// Every symbol is below U+0144: the table back is indexed by code point.
constexpr char32_t kSymbolsEnd = 0x100 + 68;
constexpr std::array<std::int16_t, kSymbolsEnd> kBytes = [] {
  std::array<std::int16_t, kSymbolsEnd> bytes{};
  for (auto& b : bytes) b = -1;
  for (unsigned byte = 0; byte < 256; ++byte) bytes[kSymbols[byte]] = static_cast<std::int16_t>(byte);
  return bytes;
}();

}  // namespace

char32_t byte_to_symbol(std::uint8_t byte) noexcept { return kSymbols[byte]; }

std::optional<std::uint8_t> symbol_to_byte(char32_t symbol) noexcept {
  if (symbol >= kSymbolsEnd || kBytes[symbol] < 0) return std::nullopt;
  return static_cast<std::uint8_t>(kBytes[symbol]);
}

std::string bytes_to_symbols(std::string_view bytes) {
  std::string symbols;
  symbols.reserve(bytes.size() * 2);
  for (const char byte : bytes) append_utf8(symbols, kSymbols[static_cast<unsigned char>(byte)]);
  return symbols;
}

std::optional<std::string> symbols_to_bytes(std::string_view symbols) {
  std::string bytes;
  bytes.reserve(symbols.size());
  for (std::size_t pos = 0; pos < symbols.size();) {
    const Utf8Char c = read_utf8(symbols, pos);
    const auto byte = symbol_to_byte(c.code_point);  // kInvalidByte is no symbol
    if (!byte) return std::nullopt;
    bytes += static_cast<char>(*byte);
    pos += c.length;
  }
  return bytes;
}

}  // namespace xgrad::text
