#include "progress.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include "numbers.hpp"
#include "xgrad/autograd/error.hpp"

namespace tools {

namespace {

// The curve as text ("step train val" lines, numbers exact), and back (nothing when
// damaged).
std::string curve_to_text(const std::vector<CurvePoint>& points) {
  std::ostringstream text;
  text.precision(17);
  for (const CurvePoint& p : points) text << p.step << ' ' << p.train_loss << ' ' << p.val_loss << '\n';
  return text.str();
}

std::optional<std::vector<CurvePoint>> curve_from_text(const std::string& text) {
  std::vector<CurvePoint> points;
  const char* at = text.data();
  const char* const end = text.data() + text.size();
  // Reads one number and the one separator after it; from_chars also reads nan and inf.
  const auto field = [&](auto& value, char separator) {
    const auto [next, error] = std::from_chars(at, end, value);
    if (error != std::errc() || next == end || *next != separator) return false;
    at = next + 1;
    return true;
  };
  while (at != end) {
    CurvePoint p;
    if (!field(p.step, ' ') || !field(p.train_loss, ' ') || !field(p.val_loss, '\n') || p.step < 0) return std::nullopt;
    points.push_back(p);
  }
  return points;
}

// The entries must agree with each other, as a run writes them.
void check_consistent(const Progress& p, const std::string& source) {
  const auto contradiction = [&](const std::string& what) {
    return UsageError(source + ": the checkpoint contradicts itself: " + what);
  };
  std::int64_t previous = -1;
  for (const CurvePoint& point : p.curve) {
    if (point.step <= previous || point.step > p.step)
      throw contradiction(xgrad::str("its curve has an evaluation at step ", point.step,
                                     previous >= 0 ? xgrad::str(" after one at step ", previous) : std::string(),
                                     " in a run at step ", p.step));
    previous = point.step;
  }
  if (p.evaluation && p.curve.empty())
    throw contradiction("it holds an evaluation (eval.val_loss) but no curve of evaluations");
  if (p.reached_target && !p.evaluation)
    throw contradiction("reached_target = true without an evaluation (eval.val_loss)");
  if (p.best_val_loss) {
    const bool found = std::any_of(p.curve.begin(), p.curve.end(),
                                   [&](const CurvePoint& point) { return point.val_loss == *p.best_val_loss; });
    const bool lowest = std::all_of(p.curve.begin(), p.curve.end(), [&](const CurvePoint& point) {
      return std::isnan(point.val_loss) || point.val_loss >= *p.best_val_loss;
    });
    if (!found || !lowest)
      throw contradiction(
          xgrad::str("best_val_loss = ", *p.best_val_loss, " is not the lowest validation loss of its curve"));
  }
}

}  // namespace

void add_progress(Metadata& m, const Progress& p) {
  m["step"] = std::to_string(p.step);
  m["wall_s"] = exact_text(p.wall_s);
  m["train_s"] = exact_text(p.train_s);
  if (const auto& e = p.evaluation) {
    m["eval.train_loss"] = exact_text(e->train_loss);
    m["eval.val_loss"] = exact_text(e->val_loss);
    if (e->token_acc) m["eval.token_acc"] = exact_text(*e->token_acc);
    if (e->exact_match) m["eval.exact_match"] = exact_text(*e->exact_match);
    if (e->bits_per_byte) m["eval.val_bits_per_byte"] = exact_text(*e->bits_per_byte);
  }
  if (p.best_val_loss) m["best_val_loss"] = exact_text(*p.best_val_loss);
  if (!p.curve.empty()) m["curve"] = curve_to_text(p.curve);
  m["recent_loss_sum"] = exact_text(p.recent_loss_sum);
  m["recent_steps"] = std::to_string(p.recent_steps);
  m["reached_target"] = p.reached_target ? "true" : "false";
}

Progress read_progress(const Metadata& m, const std::string& source) {
  const auto entry = [&](const char* key) -> const std::string* {
    const auto it = m.find(key);
    return it == m.end() ? nullptr : &it->second;
  };
  const auto damaged = [&](const char* key, const std::string& text, const std::string& expected) {
    return UsageError(xgrad::str(source, ": the checkpoint's ", key, " = '", one_line(text), "' is not ", expected));
  };
  Progress p;
  const std::string* step = entry("step");
  if (!step) throw UsageError(source + ": the checkpoint has no step (not written by xgrad-train?)");
  const std::optional<std::int64_t> parsed_step = parse_whole<std::int64_t>(*step);
  if (!parsed_step || *parsed_step < 0) throw damaged("step", *step, "a whole number >= 0");
  p.step = *parsed_step;
  // Losses may be NaN (--allow-nonfinite) and are kept as they are; times and fractions
  // may not.
  const auto real = [&](const char* key, double least, double most, bool nan_allowed) -> std::optional<double> {
    const std::string* text = entry(key);
    if (!text) return std::nullopt;
    const std::optional<double> v = parse_real(*text);
    if (!v || !((nan_allowed && std::isnan(*v)) || (*v >= least && *v <= most)))
      throw damaged(key, *text, xgrad::str("a number in [", least, ", ", most, "]", nan_allowed ? " or nan" : ""));
    return v;
  };
  const double inf = std::numeric_limits<double>::infinity();
  p.wall_s = real("wall_s", 0, 1e12, false).value_or(0.0);
  p.train_s = real("train_s", 0, 1e12, false).value_or(0.0);
  const std::optional<double> train_loss = real("eval.train_loss", 0, inf, true),
                              val_loss = real("eval.val_loss", 0, inf, true);
  if (train_loss && val_loss)
    p.evaluation = Evaluation{*train_loss, *val_loss, real("eval.token_acc", 0, 1, false),
                              real("eval.exact_match", 0, 1, false), real("eval.val_bits_per_byte", 0, inf, true)};
  p.best_val_loss = real("best_val_loss", 0, inf, false);
  p.recent_loss_sum = real("recent_loss_sum", 0, inf, true).value_or(0.0);
  if (const std::string* recent = entry("recent_steps")) {
    const std::optional<std::int64_t> steps = parse_whole<std::int64_t>(*recent);
    if (!steps || *steps < 0 || *steps > p.step) throw damaged("recent_steps", *recent, "a whole number in [0, step]");
    p.recent_steps = *steps;
  }
  if (const std::string* curve = entry("curve")) {
    std::optional<std::vector<CurvePoint>> points = curve_from_text(*curve);
    if (!points) throw damaged("curve", *curve, "lines of step, train loss and validation loss");
    p.curve = std::move(*points);
  }
  if (const std::string* reached = entry("reached_target")) {
    if (*reached != "true" && *reached != "false") throw damaged("reached_target", *reached, "true or false");
    p.reached_target = *reached == "true";
  }
  check_consistent(p, source);
  return p;
}

}  // namespace tools
