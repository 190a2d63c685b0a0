#include "xgrad/autograd/memory.hpp"

#include <sys/resource.h>
#include <sys/sysinfo.h>

#include <algorithm>
#include <cstdint>
#include <fstream>

namespace xgrad {

std::size_t usable_memory_bytes() {
  static const std::size_t bytes = [] {
    std::size_t usable = SIZE_MAX;
    struct sysinfo info {};
    if (::sysinfo(&info) == 0) usable = (static_cast<std::size_t>(info.totalram) + info.totalswap) * info.mem_unit;
    std::ifstream cgroup("/sys/fs/cgroup/memory.max");
    std::size_t limit = 0;
    if (cgroup >> limit && limit > 0) usable = std::min(usable, limit);  // "max" (no limit) does not parse
    rlimit address_space{};
    if (::getrlimit(RLIMIT_AS, &address_space) == 0 && address_space.rlim_cur != RLIM_INFINITY)
      usable = std::min<std::size_t>(usable, address_space.rlim_cur);
    return usable;
  }();
  return bytes;
}

}  // namespace xgrad
