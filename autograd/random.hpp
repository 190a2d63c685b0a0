#pragma once
// A seeded random generator whose streams are the same on every platform and standard
// library (std::mt19937_64 is fully specified; the distributions here are our own,
// because std::uniform_real_distribution and friends are not).

#include <atomic>
#include <cstdint>
#include <random>
#include <vector>

namespace xgrad {

namespace detail {
extern std::atomic<int> generator_recorders;  // GeneratorRecorders alive, on any thread
}

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : engine_(seed) {}

  void seed(std::uint64_t seed) { engine_.seed(seed); }
  std::uint64_t next_u64() { return draw(); }
  double uniform();                         // [0, 1), 53 random bits
  double uniform(double low, double high);  // [low, high)
  double normal();                          // N(0, 1), Box-Muller
  std::uint64_t below(std::uint64_t n);     // uniform integer in [0, n), unbiased

 private:
  // Every number drawn comes through here; with no recorder alive it costs a relaxed load.
  std::uint64_t draw() {
    if (detail::generator_recorders.load(std::memory_order_relaxed) > 0) [[unlikely]]
      note_draw();
    return engine_();
  }
  void note_draw();

  std::mt19937_64 engine_;
};

// The generator that parameter initialization and Dropout draw from unless given their
// own (as PyTorch's global generator): manual_seed(s) makes model building repeatable.
Generator& default_generator();
void manual_seed(std::uint64_t seed);

// While alive, notes every Generator the calling thread draws from, with its state as it
// was before that thread's first draw: setting each back to it replays the same numbers
// (recompute() re-runs a block's forward with the dropout masks of its first run).
// Recorders nest; each sees the draws made while it is alive.
class GeneratorRecorder {
 public:
  struct Start {
    Generator* generator;
    Generator state;  // a copy, as it was before the first draw
  };

  GeneratorRecorder();
  ~GeneratorRecorder();
  GeneratorRecorder(const GeneratorRecorder&) = delete;
  GeneratorRecorder& operator=(const GeneratorRecorder&) = delete;

  // In the order of their first draws.
  const std::vector<Start>& starts() const { return starts_; }

 private:
  friend class Generator;
  void note(Generator& generator);

  std::vector<Start> starts_;
  GeneratorRecorder* outer_;
};

}  // namespace xgrad
