#include "display.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <stdexcept>
#include <string>

#include "canvas.hpp"
#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/ops.hpp"

namespace tools {

void ProgressLine::show(std::int64_t step, int total, double loss, double tokens_per_second, double steps_per_second) {
  if (!enabled_) return;
  const int eta = static_cast<int>(static_cast<double>(total - step) / std::max(steps_per_second, 1e-9) + 0.5);
  char line[256];
  std::snprintf(line, sizeof line, "step %lld/%d  loss %.4f  %.1fk tokens/s  %.1f steps/s  ETA %d:%02d:%02d to step %d",
                static_cast<long long>(step), total, loss, tokens_per_second / 1000.0, steps_per_second, eta / 3600,
                eta / 60 % 60, eta % 60, total);
  // Never wider than the terminal: a wrapped line could not be rewritten in place.
  winsize size{};
  std::string shown = line;
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 1 && shown.size() >= size.ws_col)
    shown.resize(size.ws_col - 1u);
  std::printf("\r\033[K%s", shown.c_str());
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

Color shade(double w) {  // white (0) to dark blue (1); red for what is not a number (a diverged run)
  if (!(w >= 0 && w <= 1)) return {220, 30, 30};
  return {static_cast<unsigned char>(255 - w * (255 - 8)), static_cast<unsigned char>(255 - w * (255 - 48)),
          static_cast<unsigned char>(255 - w * (255 - 107))};
}

struct Maps {
  std::size_t heads, rows, cols;
  std::vector<double> values;  // each row divided by its maximum
  double at(std::size_t h, std::size_t r, std::size_t c) const { return values[(h * rows + r) * cols + c]; }
};

Maps row_scaled(const xgrad::Tensor& maps) {
  const xgrad::Shape s = maps.shape();
  if (s.size() != 3) xgrad::fail("attention map", "must be [heads, queries, keys], got ", s);
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
      for (std::size_t c = 0; c < m.cols; ++c) {
        const double w = m.at(h, r, c);
        os << (w >= 0 && w <= 1 ? shades[static_cast<int>(w * 4.999)] : "??");  // ?? not a number (a diverged run)
      }
      os << "\n";
    }
  }
}

void write_attention_png(const std::string& path, const Flag& flag, const xgrad::Tensor& maps,
                         const std::vector<std::string>& labels, const std::string& title,
                         const std::string& label_note) {
  // A picture people can read, of bounded size: at most the first 16 heads and 256
  // positions (a causal map's first queries attend to the first keys only).
  constexpr std::size_t kMostHeads = 16, kMostPositions = 256;
  const xgrad::Shape s = maps.shape();
  if (s.size() != 3) xgrad::fail("attention map", "must be [heads, queries, keys], got ", s);
  const std::size_t heads = std::min(s[0], kMostHeads), rows = std::min(s[1], kMostPositions),
                    cols = std::min(s[2], kMostPositions);
  const Maps m = row_scaled(xgrad::slice(xgrad::slice(xgrad::slice(maps, 0, 0, heads), 1, 0, rows), 2, 0, cols));
  std::string shown = title;
  if (heads < s[0]) shown += xgrad::str(", heads 0-", heads - 1, " of ", s[0]);
  if (rows < s[1] || cols < s[2]) shown += xgrad::str(", positions 0-", std::max(rows, cols) - 1, " of ", s[2]);
  const std::vector<std::string> shown_labels(labels.begin(), labels.begin() + std::min(labels.size(), cols));
  const int L = static_cast<int>(std::max(m.rows, m.cols));
  const int cell = std::clamp(512 / L, 4, 24);
  const bool labelled = labels.size() == s[2] && m.rows == m.cols && cell >= 8;
  const int label_room = labelled ? 14 : 0, axis_room = 16, gap = 28;
  const int panel_w = static_cast<int>(m.cols) * cell, panel_h = static_cast<int>(m.rows) * cell;
  int columns = static_cast<int>(m.heads);  // panels side by side, in rows when they would be too wide
  while (columns > 1 && columns * panel_w > 1600) columns = (columns + 1) / 2;
  const int panel_rows = (static_cast<int>(m.heads) + columns - 1) / columns;
  const int cell_w = axis_room + label_room + panel_w + gap, cell_h = 18 + axis_room + label_room + panel_h + gap;
  const int left = 16, top = 64, scale_w = 90;
  const std::string subtitle =
      "each row is a query position and shows how it spreads its attention over the key positions; every row is "
      "scaled to its own maximum" +
      std::string(labelled && !label_note.empty() ? " (" + label_note + ")" : "");
  const int text_w = std::max(Canvas::text_width(shown, 2), Canvas::text_width(subtitle));
  Canvas canvas(std::max(left + columns * cell_w + scale_w, text_w + 2 * left), top + panel_rows * cell_h + 8);
  canvas.text(left, 12, shown, kBlack, 2);
  canvas.text(left, 36, subtitle, kBlack);
  for (std::size_t h = 0; h < m.heads; ++h) {
    const int x0 = left + static_cast<int>(h) % columns * cell_w, y0 = top + static_cast<int>(h) / columns * cell_h;
    const int px = x0 + axis_room + label_room, py = y0 + 18 + axis_room + label_room;
    canvas.text(x0, y0, "head " + std::to_string(h), kBlack, 2);
    canvas.text(px + panel_w / 2 - Canvas::text_width("keys") / 2, y0 + 20, "keys", kGrey);
    canvas.text(x0, py + panel_h / 2 + Canvas::text_width("queries") / 2, "queries", kGrey, 1, true);
    for (std::size_t r = 0; r < m.rows; ++r)
      for (std::size_t c = 0; c < m.cols; ++c) {
        const double w = m.at(h, r, c);  // white (0) to dark blue (the row's maximum)
        canvas.fill(px + static_cast<int>(c) * cell, py + static_cast<int>(r) * cell, cell, cell, shade(w));
      }
    if (labelled)
      for (std::size_t i = 0; i < m.cols; ++i) {
        const std::string& label = shown_labels[i];
        const int offset = static_cast<int>(i) * cell + (cell - Canvas::text_width(label)) / 2;
        canvas.text(px + offset, py - label_room + 2, label, kBlack);
        canvas.text(px - label_room + 2, py + offset + 1, label, kBlack);
      }
  }
  // The colour scale.
  const int sx = left + columns * cell_w, sy = top + 40, sh = 160;
  canvas.text(sx, sy - 30, "weight /", kBlack);
  canvas.text(sx, sy - 18, "row max", kBlack);
  for (int y = 0; y < sh; ++y) canvas.fill(sx, sy + y, 16, 1, shade(1.0 - static_cast<double>(y) / (sh - 1)));
  canvas.text(sx + 22, sy - 3, "1", kBlack);
  canvas.text(sx + 22, sy + sh / 2 - 4, "0.5", kBlack);
  canvas.text(sx + 22, sy + sh - 6, "0", kBlack);
  canvas.write_png(path, flag);
}

}  // namespace tools
