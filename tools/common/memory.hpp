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

}  // namespace tools
