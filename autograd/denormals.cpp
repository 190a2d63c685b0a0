#include "xgrad/autograd/denormals.hpp"

#include <atomic>

#include "xgrad/autograd/detail/denormals.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace xgrad {

namespace {

#if defined(__x86_64__) || defined(__i386__)
constexpr std::uint64_t kFlushBits = 0x8000 | 0x0040;  // MXCSR's flush-to-zero and denormals-are-zero
#elif defined(__aarch64__)
constexpr std::uint64_t kFlushBits = std::uint64_t{1} << 24;  // FPCR.FZ: both, for single and double
#else
constexpr std::uint64_t kFlushBits = 0;
#endif

std::atomic<bool> g_flush{true};

// Outside every scope, the thread's own mode (the user's): what float64 work runs in.
thread_local int t_depth = 0;
thread_local std::uint64_t t_own_mode = 0;

}  // namespace

void set_flush_denormal(bool flush) { g_flush.store(flush, std::memory_order_relaxed); }
bool flush_denormal() { return g_flush.load(std::memory_order_relaxed); }

namespace detail {

#if defined(__x86_64__) || defined(__i386__)
// MXCSR's control bits (DAZ, the exception masks, rounding, FTZ); the rest are sticky
// exception flags that arithmetic sets, kept as they are.
constexpr unsigned kControlBits = 0xffc0;
#endif

std::uint64_t float_mode() {
#if defined(__x86_64__) || defined(__i386__)
  return _mm_getcsr() & kControlBits;
#elif defined(__aarch64__)
  std::uint64_t fpcr;
  asm volatile("mrs %0, fpcr" : "=r"(fpcr));
  return fpcr;
#else
  return 0;
#endif
}

void set_float_mode(std::uint64_t mode) {
#if defined(__x86_64__) || defined(__i386__)
  _mm_setcsr((_mm_getcsr() & ~kControlBits) | (static_cast<unsigned>(mode) & kControlBits));
#elif defined(__aarch64__)
  asm volatile("msr fpcr, %0" : : "r"(mode));
#else
  (void)mode;
#endif
}

}  // namespace detail

DenormalModeGuard::DenormalModeGuard(DType dtype) : found_(detail::float_mode()) {
  if (t_depth++ == 0) t_own_mode = found_;
  const bool flush = dtype == DType::float32 && flush_denormal();
  const std::uint64_t wanted = flush ? t_own_mode | kFlushBits : t_own_mode;
  if (wanted != found_) detail::set_float_mode(wanted);
}

DenormalModeGuard::~DenormalModeGuard() {
  if (detail::float_mode() != found_) detail::set_float_mode(found_);
  --t_depth;
}

}  // namespace xgrad
