#pragma once
// xgrad-tokenize's progress on a long input: one line on stderr, redrawn in place, for
// each stage of the work ("counting pieces", "encoding"), with how much of it is done.
// Drawn only where stderr is a terminal (a log file gets the report alone), and cleared
// before anything else is printed.

#include <chrono>
#include <cstdint>
#include <string>

namespace tools::tokenize {

class ProgressBar {
 public:
  // Drawn when `shown`; every call does nothing otherwise.
  explicit ProgressBar(bool shown) : shown_(shown) {}
  // Clears the line (an error line then starts at the margin).
  ~ProgressBar() { clear(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // A new stage of `total` bytes (0: a stage whose end is not known, shown by its name).
  void stage(std::string what, std::uint64_t total);
  // `bytes` more of the stage done.
  void advance(std::uint64_t bytes);
  void clear();

 private:
  void draw();

  bool shown_;
  bool drawn_ = false;
  std::string what_;
  std::uint64_t total_ = 0, done_ = 0;
  std::chrono::steady_clock::time_point began_, last_drawn_;
};

}  // namespace tools::tokenize
