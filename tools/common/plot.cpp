#include "plot.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>

#include "canvas.hpp"

namespace tools {

namespace {

constexpr Color kTrainColor{31, 119, 180}, kValColor{255, 127, 14};

}  // namespace

void write_learning_curve_png(const std::string& path, const Flag& flag, const std::vector<CurvePoint>& points,
                              const std::string& title) {
  const int width = std::max(900, Canvas::text_width(title, 2) + 40), height = 560;
  const int left = 100, right = width - 30, top = 60, bottom = height - 70;
  Canvas canvas(width, height);
  canvas.text(20, 16, title, kBlack, 2);

  // Ranges: steps from 0, losses over every finite value with a margin.
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  std::int64_t last_step = 1;
  for (const CurvePoint& p : points) {
    last_step = std::max(last_step, p.step);
    for (const double v : {p.train_loss, p.val_loss})
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  if (!(lo <= hi)) lo = 0, hi = 1;
  const double margin = std::max(0.05 * (hi - lo), 1e-3);
  lo = std::max(0.0, lo - margin), hi += margin;
  const auto x_of = [&](double step) { return left + (right - left) * step / static_cast<double>(last_step); };
  const auto y_of = [&](double loss) { return bottom - (bottom - top) * (loss - lo) / (hi - lo); };

  for (const double v : axis_ticks(lo, hi, 6)) {
    const double y = y_of(v);
    canvas.line(left, y, right, y, kLightGrey);
    canvas.text(left - 8 - Canvas::text_width(tick_label(v), 2), static_cast<int>(y) - 8, tick_label(v), kBlack, 2);
  }
  for (const double s : axis_ticks(0, static_cast<double>(last_step), 8)) {
    const double x = x_of(s);
    canvas.line(x, top, x, bottom, kLightGrey);
    canvas.text(static_cast<int>(x) - Canvas::text_width(tick_label(s), 2) / 2, bottom + 8, tick_label(s), kBlack, 2);
  }
  canvas.line(left, top, left, bottom, kBlack);
  canvas.line(left, bottom, right, bottom, kBlack);
  canvas.text((left + right) / 2 - Canvas::text_width("training step", 2) / 2, bottom + 36, "training step", kBlack, 2);
  const std::string y_label = "loss (cross-entropy, nats)";
  canvas.text(14, (top + bottom) / 2 + Canvas::text_width(y_label, 2) / 2, y_label, kBlack, 2, true);

  const auto curve = [&](double CurvePoint::*loss, Color color) {
    for (std::size_t i = 0; i < points.size(); ++i) {
      const double x = x_of(static_cast<double>(points[i].step)), y = y_of(points[i].*loss);
      if (!std::isfinite(y)) continue;
      canvas.fill(static_cast<int>(x) - 3, static_cast<int>(y) - 3, 7, 7, color);
      if (i > 0 && std::isfinite(points[i - 1].*loss))
        canvas.line(x_of(static_cast<double>(points[i - 1].step)), y_of(points[i - 1].*loss), x, y, color, 2);
    }
  };
  curve(&CurvePoint::train_loss, kTrainColor);
  curve(&CurvePoint::val_loss, kValColor);

  // The legend, top right.
  const int lw = 70 + Canvas::text_width("validation loss", 2), lh = 52, lx = right - lw - 10, ly = top + 10;
  canvas.fill(lx, ly, lw, lh, kWhite);
  for (const auto& [x0, y0, x1, y1] : {std::array{lx, ly, lx + lw, ly}, std::array{lx, ly + lh, lx + lw, ly + lh},
                                       std::array{lx, ly, lx, ly + lh}, std::array{lx + lw, ly, lx + lw, ly + lh}})
    canvas.line(x0, y0, x1, y1, kGrey);
  canvas.line(lx + 10, ly + 16, lx + 40, ly + 16, kTrainColor, 3);
  canvas.text(lx + 50, ly + 9, "train loss", kBlack, 2);
  canvas.line(lx + 10, ly + 38, lx + 40, ly + 38, kValColor, 3);
  canvas.text(lx + 50, ly + 31, "validation loss", kBlack, 2);
  canvas.write_png(path, flag);
}

}  // namespace tools
