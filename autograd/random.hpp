#pragma once
// A seeded random generator whose streams are the same on every platform and standard
// library (std::mt19937_64 is fully specified; the distributions here are our own,
// because std::uniform_real_distribution and friends are not).

#include <cstdint>
#include <random>

namespace xgrad {

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : engine_(seed) {}

  void seed(std::uint64_t seed) { engine_.seed(seed); }
  std::uint64_t next_u64() { return engine_(); }
  double uniform();                         // [0, 1), 53 random bits
  double uniform(double low, double high);  // [low, high)
  double normal();                          // N(0, 1), Box-Muller
  std::uint64_t below(std::uint64_t n);     // uniform integer in [0, n), unbiased

 private:
  std::mt19937_64 engine_;
};

// The generator that parameter initialization and Dropout draw from unless given their
// own (as PyTorch's global generator): manual_seed(s) makes model building repeatable.
Generator& default_generator();
void manual_seed(std::uint64_t seed);

}  // namespace xgrad
