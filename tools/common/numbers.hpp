#pragma once
// Numbers from the command line and from checkpoints, read strictly (shared by
// xgrad-train, xgrad-generate, xgrad-copy-task and xgrad-bench).

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>

namespace tools {

// Whole decimal numbers only: "010" is ten (never octal eight), and text around the
// digits or a value out of the type's range is refused rather than cut or clamped.
template <class Int>
inline std::optional<Int> parse_whole(const std::string& text) {
  Int value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

inline std::optional<double> parse_real(const std::string& text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A number as text that reads back to the same double (how checkpoints keep reals).
inline std::string exact_text(double v) {
  std::ostringstream text;
  text.precision(17);
  text << v;
  return text.str();
}

// The shortest text that reads back to the same double (messages: 0.3, not
// 0.29999999999999999; 1e-320, not 0.000).
inline std::string shortest_text(double v) {
  char text[32];
  const std::to_chars_result end = std::to_chars(text, text + sizeof text, v);
  return std::string(text, end.ptr);
}

// Rewrites a whole number to plain decimal before CLI11 converts it (CLI11 reads a
// leading 0 as octal and clamps what overflows).
template <class Int>
CLI::Validator whole_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::optional<Int> value = parse_whole<Int>(text);
        if (!value) return "'" + text + "' is not a whole number in range";
        text = std::to_string(*value);
        return {};
      },
      "");
}

// The same for a number with a fraction or an exponent: decimal only (no hex, no text
// around it, not empty); nan and inf pass, for the checks that name the flag. Rewritten
// to text that reads back to the same double.
inline CLI::Validator real_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::optional<double> value = parse_real(text);
        if (!value) return "'" + text + "' is not a decimal number in range";
        if (std::isnan(*value)) {
          text = "nan";
        } else if (std::isinf(*value)) {
          text = *value > 0 ? "inf" : "-inf";
        } else {
          char exact[32];
          const auto [end, error] = std::to_chars(exact, exact + sizeof exact, *value);
          text.assign(exact, error == std::errc() ? end : exact);
        }
        return {};
      },
      "");
}

}  // namespace tools
