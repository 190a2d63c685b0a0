#include "json.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tools {

double decimals(double value, int places) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", places, value);
  return std::strtod(text, nullptr);
}

double significant(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*g", digits, value);
  return std::strtod(text, nullptr);
}

std::string json_text(const JsonLine& line) {
  if (!line.is_object()) return line.dump();
  std::string text = "{";
  for (auto item = line.begin(); item != line.end(); ++item) {
    if (item != line.begin()) text += ", ";
    text += JsonLine(item.key()).dump() + ": " + json_text(item.value());
  }
  return text + "}";
}

}  // namespace tools
