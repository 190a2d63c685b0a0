#define BOOST_TEST_MODULE denormals
// Denormals flushed in float32 work (autograd/denormals.hpp): results below 2^-126 are
// zero and denormal inputs read as zero, in forward ops, backward and optimizer steps, on
// the caller's thread and on the pool's, on any thread count; kept on request; float64
// and the caller's own mode untouched.
#include "helpers.hpp"
#include "xgrad/autograd/denormals.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/optim/sgd.hpp"

#include <cmath>
#include <limits>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

using namespace xgrad;

namespace {

// Large enough that the pool shares the elementwise work (parallel_for's threshold).
constexpr std::size_t kElements = 1 << 20;

constexpr float kTinyFloat = 1e-40f;  // a float32 denormal
static_assert(kTinyFloat > 0.0f && kTinyFloat < std::numeric_limits<float>::min());

bool all_equal(const Tensor& t, float expected) {
  const float* v = t.data<float>();
  for (std::size_t i = 0; i < t.numel(); ++i)
    if (v[i] != expected) return false;
  return true;
}

// Runs f with flushing set to `flush` and `threads` threads, then restores both.
template <class F>
void with(bool flush, int threads, F&& f) {
  const bool saved_flush = flush_denormal();
  const int saved_threads = num_threads();
  set_flush_denormal(flush);
  set_num_threads(threads);
  try {
    f();
  } catch (...) {
    set_flush_denormal(saved_flush);
    set_num_threads(saved_threads);
    throw;
  }
  set_flush_denormal(saved_flush);
  set_num_threads(saved_threads);
}

}  // namespace

BOOST_AUTO_TEST_CASE(flushing_is_the_default) { BOOST_TEST(flush_denormal()); }

BOOST_AUTO_TEST_CASE(float32_ops_flush_results_and_inputs_on_every_thread) {
  for (const int threads : {1, 3}) {
    with(true, threads, [] {
      // Results: 1e-30 x 1e-10 = 1e-40 would be denormal.
      BOOST_TEST(all_equal(Tensor::full({kElements}, 1e-30) * 1e-10, 0.0f));
      // Inputs: a denormal stored (not computed) reads as zero.
      BOOST_TEST(all_equal(Tensor::full({kElements}, kTinyFloat) * 1e30, 0.0f));
      // A product through OpenBLAS: [1 x 64] x [64 x 1] of 1e-20 x 1e-20 terms.
      const Tensor a = Tensor::full({256, 64}, 1e-20), b = Tensor::full({64, 256}, 1e-20);
      BOOST_TEST(all_equal(matmul(a, b), 0.0f));
    });
  }
}

BOOST_AUTO_TEST_CASE(kept_on_request) {
  for (const int threads : {1, 3}) {
    with(false, threads, [] {
      const Tensor small = Tensor::full({kElements}, 1e-30) * 1e-10;
      BOOST_TEST(all_equal(small, 1e-30f * 1e-10f));
      BOOST_TEST(small.data<float>()[0] != 0.0f);
      BOOST_TEST(all_equal(Tensor::full({kElements}, kTinyFloat) * 1e30, kTinyFloat * 1e30f));
    });
  }
}

BOOST_AUTO_TEST_CASE(backward_flushes_too) {
  for (const bool flush : {true, false}) {
    with(flush, 3, [flush] {
      // dx = 1e-30 (the scale's gradient) x 1e-10 = 1e-40.
      const Tensor x = Tensor::full({kElements}, 1.0).requires_grad_();
      const Tensor c = Tensor::full({kElements}, 1e-10);
      (sum(x * c) * 1e-30).backward();
      BOOST_TEST(all_equal(x.grad(), flush ? 0.0f : 1e-30f * 1e-10f));
    });
  }
}

// Ops whose float32 work is not their output's: a cast's gradient back into float32 (the
// engine's guard follows the cast's float64 output), and embedding's renorm in place.
BOOST_AUTO_TEST_CASE(casts_and_renorms_flush_their_float32_side) {
  for (const bool flush : {true, false}) {
    with(flush, 1, [flush] {
      const Tensor x = Tensor::full({4}, 1.0).requires_grad_();
      sum(cast(x, DType::float64) * 1e-39).backward();
      BOOST_TEST(all_equal(x.grad(), flush ? 0.0f : static_cast<float>(1e-39)));
      // A denormal float32 read by a cast to float64: zero when flushing (inputs too).
      BOOST_TEST(cast(Tensor::full({4}, kTinyFloat), DType::float64).to_vector()[0] ==
                 (flush ? 0.0 : static_cast<double>(kTinyFloat)));
      // Row 0 renormed to max_norm 1: its second value 1e-37 / 1e6 is denormal.
      const Tensor weight = Tensor::from_vector({1e6, 1e-37, 1, 1}, {2, 2});
      EmbeddingOptions options;
      options.max_norm = 1.0;
      const Tensor looked_up = embedding(weight, Indices({0}, {1}), options);
      BOOST_TEST((weight.to_vector()[1] == 0.0) == flush);
      BOOST_TEST((looked_up.to_vector()[1] == 0.0) == flush);
    });
  }
}

BOOST_AUTO_TEST_CASE(optimizer_steps_flush_too) {
  for (const bool flush : {true, false}) {
    with(flush, 3, [flush] {
      // p - 0.5 g = 1e-38 - 5e-39: a denormal result.
      Tensor p = Tensor::full({kElements}, 1e-38).requires_grad_();
      p.set_grad(Tensor::full({kElements}, 1e-38));
      optim::SGD sgd({{"p", p}}, {.lr = 0.5});
      sgd.step();
      BOOST_TEST(all_equal(p, flush ? 0.0f : 1e-38f - 0.5f * 1e-38f));
    });
  }
}

BOOST_AUTO_TEST_CASE(float64_keeps_its_denormals) {
  with(true, 3, [] {
    const Tensor tiny = Tensor::full({kElements}, 1e-300, DType::float64) * 1e-10;
    const double* v = tiny.data<double>();
    BOOST_TEST(v[0] == 1e-300 * 1e-10);
    BOOST_TEST(v[0] != 0.0);
    BOOST_TEST(v[kElements - 1] == v[0]);
  });
}

#if defined(__x86_64__)
BOOST_AUTO_TEST_CASE(the_callers_mode_is_restored) {
  constexpr unsigned kFlushBits = 0x8040;  // MXCSR's FTZ and DAZ
  const unsigned before = _mm_getcsr() & kFlushBits;
  const Tensor y = Tensor::full({kElements}, 1e-30) * 1e-10;
  BOOST_TEST(all_equal(y, 0.0f));
  BOOST_TEST((_mm_getcsr() & kFlushBits) == before);
  // Code outside xgrad still computes denormals.
  volatile float a = 1e-30f, b = 1e-10f;
  BOOST_TEST(a * b != 0.0f);
}

BOOST_AUTO_TEST_CASE(float64_runs_in_the_callers_own_mode) {
  // A caller that flushes itself: float64 ops follow it, untouched by xgrad.
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040);
  const Tensor tiny = Tensor::full({kElements}, 1e-300, DType::float64) * 1e-10;
  _mm_setcsr(saved);
  BOOST_TEST(tiny.data<double>()[0] == 0.0);
  BOOST_TEST(tiny.data<double>()[kElements - 1] == 0.0);
}

BOOST_AUTO_TEST_CASE(a_guard_inside_a_guard_restores_each) {
  const DenormalModeGuard outer(DType::float32);
  {
    const DenormalModeGuard inner(DType::float64);  // the thread's own mode: denormals computed
    volatile double a = 1e-300, b = 1e-10;
    BOOST_TEST(a * b != 0.0);
  }
  volatile float a = 1e-30f, b = 1e-10f;
  BOOST_TEST(a * b == 0.0f);  // flushed again
}
#endif
