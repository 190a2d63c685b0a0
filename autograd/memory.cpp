#include "xgrad/autograd/memory.hpp"

#include <sys/resource.h>
#include <sys/sysinfo.h>

#include <algorithm>
#include <cstdint>
#include <fstream>

namespace xgrad {

namespace {

struct MemoryLimits {
  std::size_t usable = SIZE_MAX;
  bool address_space = false;  // RLIMIT_AS is the least
};

const MemoryLimits& memory_limits() {
  static const MemoryLimits limits = [] {
    MemoryLimits l;
    struct sysinfo info {};
    if (::sysinfo(&info) == 0) l.usable = (static_cast<std::size_t>(info.totalram) + info.totalswap) * info.mem_unit;
    std::ifstream cgroup("/sys/fs/cgroup/memory.max");
    std::size_t limit = 0;
    if (cgroup >> limit && limit > 0) l.usable = std::min(l.usable, limit);  // "max" (no limit) does not parse
    rlimit address_space{};
    if (::getrlimit(RLIMIT_AS, &address_space) == 0 && address_space.rlim_cur != RLIM_INFINITY &&
        address_space.rlim_cur <= l.usable) {
      l.usable = address_space.rlim_cur;
      l.address_space = true;
    }
    return l;
  }();
  return limits;
}

}  // namespace

std::size_t usable_memory_bytes() { return memory_limits().usable; }

bool address_space_limited() { return memory_limits().address_space; }

}  // namespace xgrad
