#define BOOST_TEST_MODULE heap
// Where arrays live (autograd/startup.cpp, autograd/heap.cpp): on malloc's heap, never
// mapped on their own, and that heap marked for transparent huge pages as it grows,
// unless XGRAD_HUGE_PAGES=0 (this suite also runs under it) or the kernel never gives them.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "xgrad/autograd/ops.hpp"

using namespace xgrad;

namespace {

// The mapping of this process that holds `address`, as /proc/self/smaps lists it.
struct Mapping {
  std::string name;                  // "[heap]", a file, or empty
  std::optional<bool> thp_eligible;  // absent on kernels that do not say
};

std::optional<Mapping> mapping_of(const void* address) {
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  Mapping found;
  while (std::getline(smaps, line)) {
    std::uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream fields(line);
    if (fields >> std::hex >> begin >> dash >> end && dash == '-') {  // a mapping's first line
      if (inside) return found;
      inside = begin <= at && at < end;
      std::string permissions, offset, device, inode;
      fields >> permissions >> offset >> device >> inode;
      found.name.clear();
      fields >> found.name;
    } else if (inside && line.rfind("THPeligible:", 0) == 0) {
      found.thp_eligible = line.find('1') != std::string::npos;
    }
  }
  if (inside) return found;
  return std::nullopt;
}

// The kernel's transparent huge page mode: "always", "madvise" or "never".
std::string thp_mode() {
  std::ifstream file("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string text;
  std::getline(file, text);
  const auto open = text.find('['), close = text.find(']');
  return open == std::string::npos || close == std::string::npos ? "never" : text.substr(open + 1, close - open - 1);
}

bool env_is(const char* name, const char* value) {
  const char* set = std::getenv(name);
  return set && std::strcmp(set, value) == 0;
}

bool malloc_set_by_user() {
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"})
    if (std::getenv(name)) return true;
  return false;
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitizerAllocator = true;  // its own allocator: no brk heap
#else
constexpr bool kSanitizerAllocator = false;
#endif

}  // namespace

// An op's output of 96 MiB (above any glibc mapping threshold) sits on the heap, in a
// mapping marked for huge pages as the mode and XGRAD_HUGE_PAGES say.
BOOST_AUTO_TEST_CASE(a_large_output_lives_on_the_heap_marked_for_huge_pages) {
  const Tensor a = Tensor::ones({24 << 20});
  const Tensor sum = add(a, a);
  const auto mapping = mapping_of(sum.data<float>());
  BOOST_REQUIRE(mapping.has_value());
  if (kSanitizerAllocator || malloc_set_by_user()) {
    BOOST_TEST_MESSAGE("malloc is not glibc's as libxgrad sets it: where arrays live is not checked");
    return;
  }
  BOOST_TEST(mapping->name == "[heap]");
  if (!mapping->thp_eligible) {
    BOOST_TEST_MESSAGE("this kernel does not report THPeligible in /proc/self/smaps");
    return;
  }
  const std::string mode = thp_mode();
  const bool expected = mode == "always" || (mode == "madvise" && !env_is("XGRAD_HUGE_PAGES", "0"));
  BOOST_TEST(*mapping->thp_eligible == expected,
             "THP mode " << mode << ", XGRAD_HUGE_PAGES " << (std::getenv("XGRAD_HUGE_PAGES") ?: "unset"));
  BOOST_TEST(sum.data<float>()[(24 << 20) - 1] == 2.0f);
}
