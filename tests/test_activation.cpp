#define BOOST_TEST_MODULE activation
#include "helpers.hpp"

#include <cmath>
#include <limits>
#include <numbers>

using namespace xgrad;
using namespace xgrad::test;

using Inputs = std::vector<Tensor>;

BOOST_AUTO_TEST_CASE(pointwise_activation_gradients) {
  const Tensor x = randn64({3, 5}, 1);
  check_gradients([](const Inputs& in) { return tanh(in[0]); }, {x});
  check_gradients([](const Inputs& in) { return sigmoid(in[0]); }, {x});
  check_gradients([](const Inputs& in) { return relu(in[0]); }, {x});
  check_gradients([](const Inputs& in) { return gelu(in[0]); }, {x});
  check_gradients([](const Inputs& in) { return gelu(in[0], /*approximate=*/true); }, {x});
}

BOOST_AUTO_TEST_CASE(activation_values) {
  const Tensor x = Tensor::from_vector({-1.0, 0.0, 2.0}, {3}, DType::float64);
  check_close(relu(x).to_vector(), {0.0, 0.0, 2.0});
  check_close(sigmoid(x).to_vector(), {1 / (1 + std::exp(1.0)), 0.5, 1 / (1 + std::exp(-2.0))});
  check_close(tanh(x).to_vector(), {std::tanh(-1.0), 0.0, std::tanh(2.0)});
  // GELU(x) = x * Phi(x); PyTorch's values to 1e-12.
  check_close(gelu(x).to_vector(), {-0.15865525393145707, 0.0, 1.9544997361036416});
  check_close(gelu(x, true).to_vector(), {-0.15880800939172324, 0.0, 1.954597694087775});
  // Saturation stays finite.
  const Tensor big = Tensor::from_vector({-1000.0, 1000.0}, {2}, DType::float32);
  check_close(sigmoid(big).to_vector(), {0.0, 1.0});
}

// GELU (exact, and its tanh approximation) runs fused in SIMD batches with a scalar tail:
// over sizes that fill batches, leave tails and cross the pool's chunks, its values and
// gradient (written, and added to another use's) match the formula evaluated element by
// element with std::erf, std::exp and std::tanh (float64 to 4e-14 relative to the larger
// of 1 and the value: xsimd's double erf, which the xtensor expression before used too,
// is off by up to 30 ulp of 1 where erf nears -1, putting the value off by 1.1e-14 near x
// = -3.14; float32 within 16 of its ulps of |x| + |y|: the input's rounding and about
// eight operations; its gradient within 16 ulps of (1 + |x|) |seed|, the slope crossing
// zero), extremes saturate without NaN, NaN stays NaN, and a float64 gradcheck holds on a
// size with both paths. The exact form in float32 also keeps its relative accuracy for x
// < 0, where Phi(x) is small and 1 + erf(x / sqrt 2) would cancel: within (16 + x^2 / 2)
// ulps of the value (exp(-x^2 / 2) carries x^2 / 2 ulps from its argument's rounding),
// and so does the tanh form, computed as the logistic function of 2u (below). Values from
// -14 to 14 in steps of 1e-3 cover both of float32's paths (a batch near zero, and the
// erfc form) down to where Phi(x) leaves float32's normal range (x = -12.9).
BOOST_AUTO_TEST_CASE(fused_gelu_matches_the_formula_at_every_size) {
  constexpr double kFloat64Bound = 4e-14;
  const double s = std::sqrt(2.0 / std::numbers::pi), c = 0.044715;
  const auto phi = [](double x) { return std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi); };
  const auto cdf = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };  // no cancelling for x < 0
  for (const bool approximate : {false, true}) {
    const auto value = [&](double x) {
      return approximate ? 0.5 * x * (1 + std::tanh(s * (x + c * x * x * x))) : x * cdf(x);
    };
    const auto slope = [&](double x) {
      if (!approximate) return cdf(x) + x * phi(x);
      const double t = std::tanh(s * (x + c * x * x * x));
      return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * s * (1 + 3 * c * x * x);
    };
    const char* form = approximate ? "tanh" : "exact";
    for (const std::size_t n : {1u, 7u, 8u, 16u, 37u, 1000u, 40000u}) {
      const Tensor x64 = randn64({n}, 100 + n) * 3.0;
      const Tensor x = x64.detach().requires_grad_();
      const Tensor x32 = x64.to(DType::float32).detach();
      const Tensor seed = randn64({n}, 200 + n);
      sum(gelu(x, approximate) * seed + gelu(x, approximate) * seed).backward();  // the second use adds
      const Tensor x32_grad = x32.detach().requires_grad_();
      sum(gelu(x32_grad, approximate) * seed.to(DType::float32)).backward();
      const std::vector<double> in = x64.to_vector(), w = seed.to_vector(), y = gelu(x64, approximate).to_vector(),
                                y32 = gelu(x32, approximate).to_vector(), dx = x.grad().to_vector(),
                                in32 = x32.to_vector(), dx32 = x32_grad.grad().to_vector(),
                                w32 = seed.to(DType::float32).to_vector();
      for (std::size_t i = 0; i < n; ++i) {
        BOOST_TEST(
            std::abs(dx32[i] - w32[i] * slope(in32[i])) <= 16 * 0x1p-24 * (1 + std::abs(in32[i])) * std::abs(w32[i]),
            form << ", float32, n " << n << " gradient " << i);
        const double scale = std::max(1.0, std::abs(value(in[i])));
        BOOST_TEST(std::abs(y[i] - value(in[i])) <= kFloat64Bound * scale, form << ", n " << n << " element " << i);
        BOOST_TEST(std::abs(dx[i] - 2 * w[i] * slope(in[i])) <= kFloat64Bound * std::max(1.0, std::abs(dx[i])),
                   form << ", n " << n << " gradient " << i);
        BOOST_TEST(std::abs(y32[i] - value(in32[i])) <= 16 * 0x1p-24 * (std::abs(in32[i]) + std::abs(y32[i])) + 1e-30,
                   form << ", float32, n " << n << " element " << i);
      }
    }
    std::vector<double> grid;
    for (int i = -14000; i <= 14000; ++i) grid.push_back(i * 1e-3);
    const std::vector<double> in32 = Tensor::from_vector(grid, {grid.size()}, DType::float32).to_vector(),
                              y32 = gelu(Tensor::from_vector(grid, {grid.size()}, DType::float32), approximate)
                                        .to_vector();
    for (std::size_t i = 0; i < grid.size(); ++i) {
      const double x = in32[i];
      if (!approximate) {
        const double expected = value(x);
        if (x < 0 && expected / x >= std::numeric_limits<float>::min())  // Phi(x) a normal float: x > -12.9
          BOOST_TEST(std::abs(y32[i] - expected) <= (16 + x * x / 2) * 0x1p-24 * std::abs(expected),
                     "float32 at " << x);
      } else {
        // The tanh form as the logistic of 2u, which does not cancel for x < 0 (0.5 x (1 +
        // tanh u) loses every digit there, in float64 too): within (16 + 8 |2u|) ulps of the
        // value while exp(-|2u|) is a normal float (x > -10.0; denormals are flushed); it
        // carries |2u| times u's rounding (about five operations).
        const double two_u = 2 * s * (x + c * x * x * x), expected = x / (1 + std::exp(-two_u));
        if (std::exp(-std::abs(two_u)) >= std::numeric_limits<float>::min())
          BOOST_TEST(std::abs(y32[i] - expected) <= (16 + 8 * std::abs(two_u)) * 0x1p-24 * std::abs(expected),
                     "float32 tanh form at " << x);
      }
    }
    const Tensor extremes = Tensor::from_vector({-1e30, -100.0, 100.0, 1e30, std::nan("")}, {5}, DType::float32);
    const std::vector<double> e = gelu(extremes, approximate).to_vector();
    BOOST_TEST(e[0] == 0.0, form);
    BOOST_TEST(e[1] == 0.0, form);
    BOOST_TEST(e[2] == 100.0, form);
    BOOST_TEST(e[3] == 1e30f, form);
    BOOST_TEST(std::isnan(e[4]), form);
    check_gradients([approximate](const Inputs& in) { return gelu(in[0], approximate); }, {randn64({37}, 3)});
  }
}

// An element's GELU and gradient are the same bits wherever it lies: SIMD batches of
// other neighbours (the array shifted by 1 to 17 places, as another shard or row length
// would cut it) and the padded tail give the same values, near zero, far out and mixed.
BOOST_AUTO_TEST_CASE(gelu_bits_do_not_depend_on_an_elements_neighbours) {
  std::vector<double> values = randn64({200}, 11).to_vector();
  for (std::size_t i = 0; i < values.size(); i += 3) values[i] *= 0.2;  // batches mixing near zero and far
  for (std::size_t i = 100; i < 140; ++i) values[i] *= 0.1;             // some wholly near zero
  for (const DType dtype : {DType::float32, DType::float64})
    for (const bool approximate : {false, true}) {
      const auto run = [&](std::size_t shift) {
        std::vector<double> padded(shift, 3.0);
        padded.insert(padded.end(), values.begin(), values.end());
        const Tensor x = Tensor::from_vector(padded, {padded.size()}, dtype).requires_grad_();
        const Tensor y = gelu(x, approximate);
        sum(y * y).backward();
        std::vector<double> out = y.to_vector(), grad = x.grad().to_vector();
        out.erase(out.begin(), out.begin() + shift);
        grad.erase(grad.begin(), grad.begin() + shift);
        out.insert(out.end(), grad.begin(), grad.end());
        return out;
      };
      const std::vector<double> unshifted = run(0);
      for (const std::size_t shift : {1u, 5u, 8u, 15u, 17u})
        BOOST_TEST(run(shift) == unshifted, dtype_name(dtype)
                                                << (approximate ? " tanh" : " exact") << ", shift " << shift);
    }
}

BOOST_AUTO_TEST_CASE(softmax_over_every_axis) {
  const Tensor x = randn64({2, 3, 4}, 2);
  for (int axis : {0, 1, 2, -1, -2}) {
    check_gradients([axis](const Inputs& in) { return softmax(in[0], axis); }, {x});
    check_gradients([axis](const Inputs& in) { return log_softmax(in[0], axis); }, {x});
    // Rows sum to one along the axis.
    const auto sums = sum(softmax(x, axis), {axis}).to_vector();
    for (double s : sums) BOOST_CHECK_CLOSE(s, 1.0, 1e-10);
    check_close(log_softmax(x, axis).to_vector(), log(softmax(x, axis)).to_vector(), 1e-12);
  }
  check_error([&] { softmax(x, 3); }, {"softmax", "axis 3", "[2, 3, 4]"});
}

BOOST_AUTO_TEST_CASE(softmax_with_large_logits_does_not_overflow) {
  for (DType dtype : {DType::float32, DType::float64}) {
    const Tensor x = Tensor::from_vector({1000.0, 1001.0, 999.0, -1e4, 1e4, 0.0}, {2, 3}, dtype);
    const auto p = softmax(x).to_vector();
    const auto lp = log_softmax(x).to_vector();
    const double e = std::exp(1.0), z = 1 + e + 1 / e;
    check_close(p, {1 / z, e / z, 1 / (e * z), 0.0, 1.0, 0.0}, 1e-6);
    check_close({lp[0], lp[1], lp[2], lp[4]}, {-std::log(z), 1 - std::log(z), -1 - std::log(z), 0.0}, 1e-6);
    BOOST_CHECK_CLOSE(lp[3], -2e4, 1e-5);
  }
  // Gradient check at large, well separated-but-not-saturated logits.
  const Tensor big = add(randn64({2, 5}, 3, false), 500.0).requires_grad_();
  check_gradients([](const Inputs& in) { return softmax(in[0]); }, {big});
  check_gradients([](const Inputs& in) { return log_softmax(in[0]); }, {big});
}

BOOST_AUTO_TEST_CASE(fully_masked_softmax_row_is_zero_not_nan) {
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor x = Tensor::from_vector({-inf, -inf, 0.0, 1.0}, {2, 2}, DType::float64);
  const auto p = softmax(x).to_vector();
  check_close({p[0], p[1]}, {0.0, 0.0});
  BOOST_CHECK_CLOSE(p[2] + p[3], 1.0, 1e-12);
  const auto lp = log_softmax(x).to_vector();
  BOOST_CHECK(std::isinf(lp[0]) && lp[0] < 0);
}

BOOST_AUTO_TEST_CASE(dropout_is_inverted_seeded_and_identity_when_off) {
  const Tensor x = randn64({4, 50}, 4);
  Generator gen(7);
  // Identity when not training or p == 0: the very same tensor.
  BOOST_CHECK(dropout(x, 0.5, false, gen).node() == x.node());
  BOOST_CHECK(dropout(x, 0.0, true, gen).node() == x.node());

  Generator g1(11), g2(11);
  const auto a = dropout(x, 0.3, true, g1).to_vector();
  const auto b = dropout(x, 0.3, true, g2).to_vector();
  BOOST_CHECK(a == b);  // same seed, same mask
  const auto xv = x.to_vector();
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == 0.0)
      ++dropped;
    else
      BOOST_CHECK_CLOSE(a[i], xv[i] / 0.7, 1e-10);
  }
  BOOST_CHECK(dropped > 30 && dropped < 90);  // about 60 of 200

  check_gradients(
      [](const Inputs& in) {
        Generator fixed(5);  // reseeded per call: gradcheck needs a deterministic function
        return dropout(in[0], 0.4, true, fixed);
      },
      {x});
  check_error([&] { dropout(x, 1.0, true, gen); }, {"dropout", "outside [0, 1)"});
  check_error([&] { dropout(x, -0.1, true, gen); }, {"dropout"});
}

BOOST_AUTO_TEST_CASE(silu_and_softplus) {
  const Tensor x = add(randn64({3, 5}, 21, false), 0.0).requires_grad_();
  check_gradients([](const Inputs& in) { return silu(in[0]); }, {x});
  check_gradients([](const Inputs& in) { return softplus(in[0]); }, {x});
  // Beyond the threshold softplus is x itself (gradient 1); below, the smooth curve.
  const Tensor wide = mul(randn64({4, 6}, 22, false), 4.0).requires_grad_();
  check_gradients([](const Inputs& in) { return softplus(in[0], 2.0, 3.0); }, {wide});
  const Tensor v = Tensor::from_vector({-1000.0, 0.0, 30.0, 1000.0}, {4}, DType::float32);
  check_close(softplus(v).to_vector(), {0.0, std::log(2.0), 30.0, 1000.0}, 1e-6);
  check_close(silu(v).to_vector(), {0.0, 0.0, 30.0, 1000.0}, 1e-6);  // no overflow to NaN
  check_error([&] { softplus(x, 0.0); }, {"softplus", "beta"});
}

BOOST_AUTO_TEST_CASE(swiglu_is_silu_of_gate_times_up) {
  Tensor gate = randn64({3, 5}, 31), up = randn64({3, 5}, 32);
  const auto swiglu_of = [](const Inputs& in) { return swiglu(in[0], in[1]); };
  check_gradients(swiglu_of, {gate, up});
  check_gradients(swiglu_of, {randn64({2, 3, 5}, 33), randn64({5}, 34)});  // broadcasting as mul
  check_gradients(swiglu_of, {randn64({5}, 35), randn64({2, 5}, 36)});
  // The composed ops, values and both gradients.
  const Tensor w = randn64({3, 5}, 37, false);
  const Tensor fused = swiglu(gate, up);
  sum(fused * w).backward();
  const auto d_gate = gate.grad().to_vector(), d_up = up.grad().to_vector();
  gate.zero_grad(), up.zero_grad();
  const Tensor composed = silu(gate) * up;
  sum(composed * w).backward();
  check_close(fused.to_vector(), composed.to_vector(), 1e-15);
  check_close(d_gate, gate.grad().to_vector(), 1e-14);
  check_close(d_up, up.grad().to_vector(), 1e-14);
  // Far out in float32: exp overflows to inf, never NaN, values or gradients.
  const Tensor g32 = Tensor::from_vector({-1000.0, -30.0, 0.0, 30.0, 1000.0}, {5}, DType::float32).requires_grad_();
  const Tensor u32 = Tensor::full({5}, 2.0, DType::float32).requires_grad_();
  const Tensor far = swiglu(g32, u32);
  check_close(far.to_vector(), {0.0, -60.0 / (1.0 + std::exp(30.0)), 0.0, 60.0, 2000.0}, 1e-6);
  sum(far).backward();
  for (double g : g32.grad().to_vector()) BOOST_CHECK(std::isfinite(g));
  for (double g : u32.grad().to_vector()) BOOST_CHECK(std::isfinite(g));
  check_error([&] { swiglu(gate, randn64({4}, 38)); }, {"swiglu", "[3, 5]", "[4]"});
  check_error([&] { swiglu(gate, up.to(DType::float32)); }, {"swiglu", "dtype"});
}

BOOST_AUTO_TEST_CASE(swiglu_float32_within_its_rounding) {
  // float32 against float64 on the same values. silu(g) up is exp(-g) (within 4 ulp even
  // vectorised), then 1 + e, a division and a product, each rounded once: a relative error
  // of at most 4u + 3u = 7u (u = 2^-24) of each result, to first order; 8u is allowed.
  const double u = std::ldexp(1.0, -24);
  const Tensor gate = mul(randn64({4, 64}, 39, false), 4.0).to(DType::float32);
  const Tensor up = randn64({4, 64}, 40, false).to(DType::float32);
  const auto got = swiglu(gate, up).to_vector();
  const auto ref = swiglu(gate.to(DType::float64), up.to(DType::float64)).to_vector();
  for (std::size_t i = 0; i < ref.size(); ++i)
    BOOST_CHECK_MESSAGE(std::abs(got[i] - ref[i]) <= 8 * u * std::abs(ref[i]), i << ": " << got[i] << " vs " << ref[i]);
}
