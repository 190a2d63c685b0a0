#include "progress_bar.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace tools::tokenize {

void ProgressBar::stage(std::string what, std::uint64_t total) {
  if (!shown_) return;
  what_ = std::move(what);
  total_ = total;
  done_ = 0;
  began_ = std::chrono::steady_clock::now();
  draw();
}

void ProgressBar::advance(std::uint64_t bytes) {
  if (!shown_) return;
  done_ += bytes;
  // At most ten times a second: a terminal that redraws for every stretch slows the run.
  if (done_ < total_ && std::chrono::steady_clock::now() - last_drawn_ < std::chrono::milliseconds(100)) return;
  draw();
}

void ProgressBar::draw() {
  constexpr int kWidth = 20;
  last_drawn_ = std::chrono::steady_clock::now();
  char line[256];
  if (total_ == 0) {
    std::snprintf(line, sizeof line, "xgrad-tokenize: %s ...", what_.c_str());
  } else {
    const double fraction = std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_));
    const int filled = static_cast<int>(fraction * kWidth);
    const double seconds = std::chrono::duration<double>(last_drawn_ - began_).count();
    std::snprintf(line, sizeof line, "xgrad-tokenize: %s [%s%s] %3.0f%%  %.1f of %.1f MB  %.1f MB/s", what_.c_str(),
                  std::string(filled, '#').c_str(), std::string(kWidth - filled, '.').c_str(), 100 * fraction,
                  static_cast<double>(done_) / 1e6, static_cast<double>(total_) / 1e6,
                  seconds > 0 ? static_cast<double>(done_) / 1e6 / seconds : 0.0);
  }
  // Never wider than the terminal: a wrapped line could not be redrawn in place.
  std::string shown = line;
  winsize size{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 1 && shown.size() >= size.ws_col)
    shown.resize(size.ws_col - 1u);
  std::fprintf(stderr, "\r\033[K%s", shown.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::clear() {
  if (!drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace tools::tokenize
