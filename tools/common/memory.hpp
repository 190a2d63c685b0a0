#pragma once
// Memory as the tools' checks before a run state it (xgrad-train, xgrad-copy-task). What
// a process may use is the library's one answer, xgrad::usable_memory_bytes().

#include <cstdio>
#include <string>

#include "xgrad/autograd/memory.hpp"

namespace tools {

// "512 MiB", "3.2 GiB", "4.7e+12 GiB".
inline std::string gib(double bytes) {
  const double mib = bytes / (1024.0 * 1024), gibs = mib / 1024;
  char text[32];
  if (gibs < 1)
    std::snprintf(text, sizeof text, "%.0f MiB", mib);
  else
    std::snprintf(text, sizeof text, gibs < 1e6 ? "%.1f GiB" : "%.3g GiB", gibs);
  return text;
}

// A count as a message gives it: whole up to 10^15 ("1048576"), then "3.3e+18" (a count
// estimated in double precision, past what an integer type holds).
inline std::string count_text(double count) {
  char text[32];
  std::snprintf(text, sizeof text, count < 1e15 ? "%.0f" : "%.2g", count);
  return text;
}

}  // namespace tools
