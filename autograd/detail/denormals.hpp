#pragma once
// Internal: the floating-point control word DenormalModeGuard sets
// (autograd/denormals.hpp), which the pool carries from its caller to its workers.

#include <cstdint>

namespace xgrad::detail {

// The calling thread's floating-point control bits (MXCSR's, FPCR; 0 where unsupported);
// setting them leaves the exception flags as they are.
std::uint64_t float_mode();
void set_float_mode(std::uint64_t mode);

// A pool worker runs a job in its caller's mode, then goes back to its own.
class ModeOf {
 public:
  explicit ModeOf(std::uint64_t caller_mode) : found_(float_mode()) {
    if (caller_mode != found_) set_float_mode(caller_mode);
  }
  ~ModeOf() {
    if (float_mode() != found_) set_float_mode(found_);
  }
  ModeOf(const ModeOf&) = delete;
  ModeOf& operator=(const ModeOf&) = delete;

 private:
  std::uint64_t found_;
};

}  // namespace xgrad::detail
