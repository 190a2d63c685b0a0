#include "canvas.hpp"

#include <stb/stb_easy_font.h>
#include <stb/stb_image_write.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "cli.hpp"
#include "xgrad/autograd/files.hpp"

namespace tools {

Canvas::Canvas(int width, int height, Color background)
    : width_(width), height_(height), rgb_(static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * 3) {
  fill(0, 0, width, height, background);
}

void Canvas::fill(int x, int y, int w, int h, Color color) {
  const int x0 = std::max(0, x), y0 = std::max(0, y), x1 = std::min(width_, x + w), y1 = std::min(height_, y + h);
  for (int py = y0; py < y1; ++py)
    for (int px = x0; px < x1; ++px) {
      unsigned char* p = &rgb_[(static_cast<std::size_t>(py) * static_cast<std::size_t>(width_) + px) * 3];
      p[0] = color.r, p[1] = color.g, p[2] = color.b;
    }
}

void Canvas::line(double x0, double y0, double x1, double y1, Color color, int thickness) {
  const int steps = static_cast<int>(std::ceil(std::max(std::abs(x1 - x0), std::abs(y1 - y0)))) + 1;
  for (int i = 0; i <= steps; ++i) {
    const double t = static_cast<double>(i) / steps;
    const int x = static_cast<int>(std::lround(x0 + t * (x1 - x0))) - thickness / 2;
    const int y = static_cast<int>(std::lround(y0 + t * (y1 - y0))) - thickness / 2;
    fill(x, y, thickness, thickness, color);
  }
}

void Canvas::text(int x, int y, const std::string& text, Color color, int scale, bool vertical) {
  // stb_easy_font builds each glyph from quads of font pixels (x, y, z, rgba per vertex).
  struct Vertex {
    float x, y, z;
    unsigned char rgba[4];
  };
  std::vector<Vertex> quads(text.size() * 70 + 64);
  std::string copy = text;
  const int count =
      stb_easy_font_print(0, 0, copy.data(), nullptr, quads.data(), static_cast<int>(quads.size() * sizeof(Vertex)));
  for (int q = 0; q < count; ++q) {
    const Vertex* v = &quads[static_cast<std::size_t>(q) * 4];
    const float left = std::min(v[0].x, v[2].x), top = std::min(v[0].y, v[2].y);
    const float right = std::max(v[0].x, v[2].x), bottom = std::max(v[0].y, v[2].y);
    const int w = static_cast<int>(std::lround((right - left) * scale));
    const int h = static_cast<int>(std::lround((bottom - top) * scale));
    const int qx = static_cast<int>(std::lround(left * scale)), qy = static_cast<int>(std::lround(top * scale));
    if (vertical)  // rotated a quarter turn anticlockwise about (x, y)
      fill(x + qy, y - qx - w, h, w, color);
    else
      fill(x + qx, y + qy, w, h, color);
  }
}

int Canvas::text_width(const std::string& text, int scale) {
  std::string copy = text;
  return stb_easy_font_width(copy.data()) * scale;
}

int Canvas::text_height(int scale) { return 8 * scale; }

void Canvas::write_png(const std::string& path, const Flag& flag) const {
  std::string png;
  const auto append = [](void* out, void* data, int size) {
    static_cast<std::string*>(out)->append(static_cast<const char*>(data), static_cast<std::size_t>(size));
  };
  if (!stbi_write_png_to_func(append, &png, width_, height_, 3, rgb_.data(), width_ * 3))
    throw UsageError(flag.dashed() + ": the image could not be encoded");
  xgrad::write_file_atomically(path, png, flag.dashed());
}

std::vector<double> axis_ticks(double lo, double hi, int count) {
  const double raw = (hi - lo) / count, power = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / power < 1.5   ? power
                      : raw / power < 3.5 ? 2 * power
                      : raw / power < 7.5 ? 5 * power
                                          : 10 * power;
  std::vector<double> values;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) values.push_back(v);
  return values;
}

std::string tick_label(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", std::abs(value) < 1e-12 ? 0.0 : value);
  return text;
}

}  // namespace tools
