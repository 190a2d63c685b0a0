#include "display.hpp"

#include <stb/stb_image_write.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <stdexcept>
#include <string>

#include "xgrad/nn/files.hpp"

namespace train {

void ProgressLine::show(int step, int total, double loss, double tokens_per_second, double eta_seconds) {
  if (!enabled_) return;
  const int eta = static_cast<int>(eta_seconds + 0.5);
  std::printf("\r\033[Kstep %d/%d  loss %.4f  %.1fk tokens/s  ETA %d:%02d", step, total, loss,
              tokens_per_second / 1000.0, eta / 60, eta % 60);
  std::fflush(stdout);
  shown_ = true;
}

void ProgressLine::clear() {
  if (!shown_) return;
  std::printf("\r\033[K");
  std::fflush(stdout);
  shown_ = false;
}

std::string token_text(const std::vector<std::int64_t>& tokens, std::size_t vocab) {
  std::string text;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::int64_t t = tokens[i];
    if (vocab <= 36) {
      text += t < 0 ? '.' : "0123456789abcdefghijklmnopqrstuvwxyz"[t];
    } else {
      if (i) text += ' ';
      text += t < 0 ? std::string(".") : std::to_string(t);
    }
  }
  return text;
}

void print_sample(std::ostream& os, const std::vector<std::int64_t>& input, const std::vector<std::int64_t>& prediction,
                  const std::vector<std::int64_t>& target, std::size_t vocab, std::int64_t ignore) {
  std::vector<std::int64_t> shown_prediction = prediction;
  std::string marks;
  for (std::size_t i = 0; i < target.size(); ++i) {
    if (target[i] == ignore) shown_prediction[i] = -1;
    const bool wrong = target[i] != ignore && prediction[i] != target[i];
    const std::string cell = token_text({prediction[i]}, vocab);
    marks += std::string(cell.size(), wrong ? '^' : ' ');
    if (vocab > 36 && i + 1 < target.size()) marks += ' ';
  }
  os << "  input      " << token_text(input, vocab) << "\n"
     << "  predicted  " << token_text(shown_prediction, vocab) << "\n"
     << "  target     " << token_text(target, vocab) << "\n";
  if (marks.find('^') != std::string::npos) os << "             " << marks << "\n";
}

namespace {

struct Maps {
  std::size_t heads, rows, cols;
  std::vector<double> values;  // each row divided by its maximum
  double at(std::size_t h, std::size_t r, std::size_t c) const { return values[(h * rows + r) * cols + c]; }
};

Maps row_scaled(const xgrad::Tensor& maps) {
  const xgrad::Shape s = maps.shape();
  if (s.size() != 3) throw std::invalid_argument("attention maps must be [heads, queries, keys]");
  Maps m{s[0], s[1], s[2], maps.to_vector()};
  for (std::size_t row = 0; row < m.heads * m.rows; ++row) {
    double* r = m.values.data() + row * m.cols;
    const double top = *std::max_element(r, r + m.cols);
    if (top > 0)
      for (std::size_t c = 0; c < m.cols; ++c) r[c] /= top;
  }
  return m;
}

}  // namespace

void print_attention(std::ostream& os, const xgrad::Tensor& maps, const std::vector<std::int64_t>& tokens,
                     std::size_t vocab) {
  static const char* const shades[] = {"  ", "\u2591\u2591", "\u2592\u2592", "\u2593\u2593", "\u2588\u2588"};
  const Maps m = row_scaled(maps);
  const bool labels = vocab <= 36 && tokens.size() == m.cols;
  const std::string columns = labels ? token_text(tokens, vocab) : "";
  for (std::size_t h = 0; h < m.heads; ++h) {
    os << "  head " << h << (labels ? "   keys: " : "") << "\n";
    if (labels) {
      os << "      ";
      for (char c : columns) os << c << ' ';
      os << "\n";
    }
    for (std::size_t r = 0; r < m.rows; ++r) {
      os << "    " << (labels ? columns[r] : ' ') << ' ';
      for (std::size_t c = 0; c < m.cols; ++c) os << shades[std::min<int>(4, static_cast<int>(m.at(h, r, c) * 4.999))];
      os << "\n";
    }
  }
}

void write_attention_png(const std::string& path, const xgrad::Tensor& maps) {
  const Maps m = row_scaled(maps);
  const std::size_t cell = std::max<std::size_t>(4, 256 / std::max(m.rows, m.cols)), gap = 8;
  const std::size_t width = m.heads * m.cols * cell + (m.heads + 1) * gap, height = m.rows * cell + 2 * gap;
  std::vector<unsigned char> rgb(width * height * 3, 160);  // grey between the heads
  for (std::size_t h = 0; h < m.heads; ++h)
    for (std::size_t r = 0; r < m.rows; ++r)
      for (std::size_t c = 0; c < m.cols; ++c) {
        const double w = m.at(h, r, c);  // white (0) to dark blue (1)
        const unsigned char color[3] = {static_cast<unsigned char>(255 - w * (255 - 8)),
                                        static_cast<unsigned char>(255 - w * (255 - 48)),
                                        static_cast<unsigned char>(255 - w * (255 - 107))};
        for (std::size_t y = 0; y < cell; ++y)
          for (std::size_t x = 0; x < cell; ++x) {
            const std::size_t px = gap + h * (m.cols * cell + gap) + c * cell + x, py = gap + r * cell + y;
            std::copy(color, color + 3, rgb.begin() + static_cast<std::ptrdiff_t>((py * width + px) * 3));
          }
      }
  // Encoded in memory, then written like a checkpoint: atomically, never through a device.
  std::string png;
  const auto append = [](void* out, void* data, int size) {
    static_cast<std::string*>(out)->append(static_cast<const char*>(data), static_cast<std::size_t>(size));
  };
  if (!stbi_write_png_to_func(append, &png, static_cast<int>(width), static_cast<int>(height), 3, rgb.data(),
                              static_cast<int>(width * 3)))
    throw std::runtime_error("--attention-png: the image could not be encoded");
  xgrad::nn::write_file_atomically(path, png, "--attention-png");
}

}  // namespace train
