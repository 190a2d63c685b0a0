#pragma once
// The tools' JSON lines (xgrad-train's --metrics, xgrad-bench's results): built as
// nlohmann objects, written flat in the layout Python's json.dumps uses ({"step": 5,
// "val_loss": 1.6038}), which the PyTorch reference scripts write too. NaN and infinite
// numbers are written null (JSON has no NaN).

#include <nlohmann/json.hpp>
#include <string>

namespace tools {

using JsonLine = nlohmann::ordered_json;  // keys in the order they were set

// `value` to `decimals` places after the point, or to `digits` significant digits, as
// the line should show it.
double decimals(double value, int decimals);
double significant(double value, int digits);

// One line, without its newline.
std::string json_text(const JsonLine& line);

}  // namespace tools
