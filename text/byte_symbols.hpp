#pragma once
// GPT-2's byte alphabet (its bytes_to_unicode): each of the 256 bytes as a printable
// character, so that vocabulary files (encoder.json, vocab.bpe) hold any byte string as
// text. The bytes 33..126, 161..172 and 174..255 stand for themselves (as Latin-1
// characters); the other 68 (the controls, the space, 127..160 and 173) take U+0100
// onward in byte order: 0 is U+0100 'Ā', the newline U+010A 'Ċ', the space U+0120 'Ġ',
// 173 U+0143 'Ń'.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace xgrad::text {

char32_t byte_to_symbol(std::uint8_t byte) noexcept;
// The byte a symbol stands for; nullopt for a character outside the alphabet.
std::optional<std::uint8_t> symbol_to_byte(char32_t symbol) noexcept;

// Bytes as symbols, in UTF-8: "Hello world\n" is "HelloĠworldĊ".
std::string bytes_to_symbols(std::string_view bytes);
// Symbols back to bytes; nullopt when the text holds a character outside the alphabet
// (or is not valid UTF-8).
std::optional<std::string> symbols_to_bytes(std::string_view symbols);

}  // namespace xgrad::text
