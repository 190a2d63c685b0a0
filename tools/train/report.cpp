#include "report.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>

#include "json.hpp"
#include "xgrad/autograd/files.hpp"

namespace tools {

using xgrad::str;

void write_line(std::ofstream& out, const Config& c, const std::string& line) {
  out << line << '\n';
  out.flush();
  if (!out)
    throw UsageError(str(flag(&Config::metrics), " ", c.metrics, ": writing failed (", std::strerror(errno), ")"));
}

void keep_metrics_up_to(const Config& c, std::int64_t step, const std::vector<CurvePoint>& curve) {
  std::error_code error;
  if (!std::filesystem::exists(c.metrics, error)) return;
  const std::string what = str(flag(&Config::metrics), " ", c.metrics);
  const std::string text = xgrad::read_regular_file(c.metrics, what);
  // A loss as the line wrote it: 4 decimals, a non-finite one as null.
  const auto same_loss = [](const JsonLine& written, double loss) {
    return std::isfinite(loss) ? written == JsonLine(decimals(loss, 4)) : written.is_null();
  };
  std::istringstream lines(text);
  std::string line, kept;
  std::int64_t last = -1;
  std::optional<std::int64_t> contradicted;  // the first line's step whose losses the curve's differ from
  while (std::getline(lines, line)) {
    const JsonLine entry = JsonLine::parse(line, nullptr, /*allow_exceptions=*/false);
    if (entry.is_discarded() || !entry.is_object() || !entry.contains("step") || entry.contains("final")) continue;
    if (!entry["step"].is_number_integer()) continue;
    const auto at = entry["step"].get<std::int64_t>();
    if (at <= last || at > step) continue;
    const auto point = std::find_if(curve.begin(), curve.end(), [&](const CurvePoint& p) { return p.step == at; });
    if (point != curve.end() && !contradicted &&
        !(same_loss(entry.value("train_loss", JsonLine()), point->train_loss) &&
          same_loss(entry.value("val_loss", JsonLine()), point->val_loss)))
      contradicted = at;
    kept += line + '\n';
    last = at;
  }
  const bool evaluated = std::any_of(curve.begin(), curve.end(), [&](const CurvePoint& p) { return p.step <= step; });
  if (!evaluated) {
    kept.clear();  // the run wrote no line yet: those there are another run's, which it replaces
  } else if (contradicted) {
    throw UsageError(str(what, ": its line at step ", *contradicted, " is not this run's evaluation there (",
                         "another run wrote the file since): give another file, or move that one away"));
  }
  if (kept != text) xgrad::write_file_atomically(c.metrics, kept, what);
}

std::string describe(const Evaluation& e, bool with_train_loss) {
  char text[160];
  std::string line;
  if (with_train_loss) {
    std::snprintf(text, sizeof text, "train loss %.4f  ", e.train_loss);
    line = text;
  }
  std::snprintf(text, sizeof text, "val loss %.4f", e.val_loss);
  line += text;
  if (e.bits_per_byte) {
    std::snprintf(text, sizeof text, " (%.3f bits/byte)", *e.bits_per_byte);
    line += text;
  }
  if (e.token_acc && e.exact_match) {
    std::snprintf(text, sizeof text, "  token acc %.4f  exact-match %.4f", *e.token_acc, *e.exact_match);
    line += text;
  }
  return line;
}

std::string metrics_line(std::int64_t step, const Evaluation& e, double lr, double train_s, double wall_s) {
  JsonLine line{{"step", step}, {"train_loss", decimals(e.train_loss, 4)}, {"val_loss", decimals(e.val_loss, 4)}};
  if (e.bits_per_byte) line["val_bits_per_byte"] = decimals(*e.bits_per_byte, 4);
  if (e.token_acc && e.exact_match) {
    line["token_acc"] = decimals(*e.token_acc, 4);
    line["exact_match"] = decimals(*e.exact_match, 4);
  }
  line["lr"] = significant(lr, 6);
  line["train_s"] = decimals(train_s, 2);
  line["wall_s"] = decimals(wall_s, 2);
  return json_text(line);
}

std::string model_sizes(std::size_t layers, std::size_t width, std::size_t heads) {
  return str(layers, layers == 1 ? " layer" : " layers", ", d-model ", width, ", ", heads,
             heads == 1 ? " head" : " heads");
}

std::string flag_sizes(const Config& c) {
  const auto size = [](int v) { return static_cast<std::size_t>(v); };
  return model_sizes(size(c.layers), size(c.d_model), size(c.heads));
}

std::string run_title(const Config& c, const std::string& sizes, std::size_t parameters) {
  std::string title = str("xgrad-train ", flag(&Config::task), " ", c.task, ": ", sizes, ", ", parameters,
                          " parameters; batch ", c.batch, " x ", c.seq_len, ", ", c.optimizer, " lr ", c.lr);
  if (c.schedule != "constant") title += str(" (", c.schedule, ")");
  return title;
}

}  // namespace tools
