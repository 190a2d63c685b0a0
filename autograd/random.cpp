#include "xgrad/autograd/random.hpp"

#include <cmath>
#include <numbers>

#include "xgrad/autograd/error.hpp"

namespace xgrad {

namespace detail {
std::atomic<int> generator_recorders{0};
}

namespace {
thread_local GeneratorRecorder* innermost_recorder = nullptr;
}

void Generator::note_draw() {
  for (GeneratorRecorder* recorder = innermost_recorder; recorder; recorder = recorder->outer_) recorder->note(*this);
}

double Generator::uniform() { return static_cast<double>(draw() >> 11) * 0x1.0p-53; }

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
    x = draw();
  } while (x >= limit);
  return x % n;
}

Generator& default_generator() {
  static Generator generator(0);
  return generator;
}

void manual_seed(std::uint64_t seed) { default_generator().seed(seed); }

GeneratorRecorder::GeneratorRecorder() : outer_(innermost_recorder) {
  innermost_recorder = this;
  detail::generator_recorders.fetch_add(1, std::memory_order_relaxed);
}

GeneratorRecorder::~GeneratorRecorder() {
  innermost_recorder = outer_;
  detail::generator_recorders.fetch_sub(1, std::memory_order_relaxed);
}

void GeneratorRecorder::note(Generator& generator) {
  // A dropout mask draws once per element: the generator just seen is the usual case.
  if (!starts_.empty() && starts_.back().generator == &generator) return;
  for (const Start& start : starts_)
    if (start.generator == &generator) return;
  starts_.push_back({&generator, generator});
}

}  // namespace xgrad
