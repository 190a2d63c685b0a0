#pragma once
// What memory a process may use, for the checks that refuse a run too large for the
// machine before it starts (shared by xgrad-train and xgrad-copy-task).

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

namespace train {

// The smallest of what this process may use: RAM, the cgroup's limit, the address space.
inline double available_bytes() {
  double bytes = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  std::ifstream cgroup("/sys/fs/cgroup/memory.max");
  double limit = 0;
  if (cgroup >> limit && limit > 0) bytes = std::min(bytes, limit);  // "max" (no limit) does not parse
  rlimit address_space{};
  if (::getrlimit(RLIMIT_AS, &address_space) == 0 && address_space.rlim_cur != RLIM_INFINITY)
    bytes = std::min(bytes, static_cast<double>(address_space.rlim_cur));
  return bytes;
}

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

}  // namespace train
