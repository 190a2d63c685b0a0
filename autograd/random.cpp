#include "xgrad/autograd/random.hpp"

#include <cmath>
#include <numbers>

#include "xgrad/autograd/error.hpp"

namespace xgrad {

double Generator::uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

double Generator::uniform(double low, double high) { return low + (high - low) * uniform(); }

double Generator::normal() {
  // 1 - u lies in (0, 1], so the log is finite.
  const double radius = std::sqrt(-2.0 * std::log(1.0 - uniform()));
  return radius * std::cos(2.0 * std::numbers::pi * uniform());
}

std::uint64_t Generator::below(std::uint64_t n) {
  XGRAD_CHECK(n > 0, "Generator::below", "needs n > 0 (a number in [0, n)), got 0");
  // Rejection sampling: drop the top partial block so every residue is equally likely.
  const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n);
  std::uint64_t x;
  do {
    x = engine_();
  } while (x >= limit);
  return x % n;
}

Generator& default_generator() {
  static Generator generator(0);
  return generator;
}

void manual_seed(std::uint64_t seed) { default_generator().seed(seed); }

}  // namespace xgrad
