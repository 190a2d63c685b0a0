#pragma once
// A small RGB drawing surface for xgrad-train's pictures (the learning curve, the
// attention maps): filled rectangles, lines, and ASCII text in stb_easy_font's bitmap
// font, written as a PNG atomically.

#include <string>
#include <vector>

#include "flag.hpp"

namespace tools {

struct Color {
  unsigned char r, g, b;
};

constexpr Color kWhite{255, 255, 255}, kBlack{0, 0, 0}, kGrey{150, 150, 150}, kLightGrey{225, 225, 225};

class Canvas {
 public:
  Canvas(int width, int height, Color background = kWhite);
  int width() const { return width_; }
  int height() const { return height_; }

  void fill(int x, int y, int w, int h, Color color);  // clipped to the canvas
  void line(double x0, double y0, double x1, double y1, Color color, int thickness = 1);
  // Text with its top-left corner at (x, y), each font pixel `scale` pixels wide; vertical
  // text reads bottom to top, starting at (x, y) and going up.
  void text(int x, int y, const std::string& text, Color color, int scale = 1, bool vertical = false);
  static int text_width(const std::string& text, int scale = 1);
  static int text_height(int scale = 1);

  // Encoded in memory, then written like a checkpoint: atomically, never through a
  // device. `flag` names the option in errors.
  void write_png(const std::string& path, const Flag& flag) const;

 private:
  int width_, height_;
  std::vector<unsigned char> rgb_;
};

// About `count` round tick values (1, 2 or 5 times a power of ten apart) covering [lo, hi],
// and a tick's label.
std::vector<double> axis_ticks(double lo, double hi, int count);
std::string tick_label(double value);

}  // namespace tools
