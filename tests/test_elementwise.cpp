#define BOOST_TEST_MODULE elementwise
#include "helpers.hpp"
#include "xgrad/autograd/parallel.hpp"

using namespace xgrad;
using namespace xgrad::test;

using Inputs = std::vector<Tensor>;
using Binary = Tensor (*)(const Tensor&, const Tensor&);

BOOST_AUTO_TEST_CASE(arithmetic_gradients_same_shape) {
  const Tensor a = randn64({3, 4}, 1), b = uniform64({3, 4}, 0.5, 2.0, 2);
  check_gradients([](const Inputs& in) { return add(in[0], in[1]); }, {a, b});
  check_gradients([](const Inputs& in) { return sub(in[0], in[1]); }, {a, b});
  check_gradients([](const Inputs& in) { return mul(in[0], in[1]); }, {a, b});
  check_gradients([](const Inputs& in) { return div(in[0], in[1]); }, {a, b});
  check_gradients([](const Inputs& in) { return neg(in[0]); }, {a});
}

BOOST_AUTO_TEST_CASE(arithmetic_gradients_broadcast) {
  // [3, 1, 4] with [2, 4]: both sides broadcast, gradients are summed back.
  const Tensor a = randn64({3, 1, 4}, 3), b = uniform64({2, 4}, 0.5, 2.0, 4);
  for (Binary op : std::vector<Binary>{add, sub, mul, div}) {
    Tensor out = op(a, b);
    BOOST_CHECK(out.shape() == (Shape{3, 2, 4}));
    check_gradients([op](const Inputs& in) { return op(in[0], in[1]); }, {a, b});
  }
  // A scalar tensor and a column against a row.
  const Tensor s = uniform64({}, 0.5, 2.0, 5), col = randn64({3, 1}, 6), row = uniform64({1, 5}, 0.5, 2, 7);
  check_gradients([](const Inputs& in) { return in[0] * in[1]; }, {s, a});
  check_gradients([](const Inputs& in) { return in[0] / in[1]; }, {col, row});
}

// One operand repeated along the other's leading axes (a bias, a positional table: at least
// 64 elements) runs block by block on the pool (ops/pointwise.hpp, row_broadcast_op). For
// exact ops its values and gradients must be those of the same op on the operand expanded
// first, bit for bit in float32 (each element computed alike, the repeated operand's
// gradient summed in block order); pow's and swiglu's values, where each element is xsimd's
// vector pow or exp or the C library's depending on where it falls in a chunk, within 4
// float32 ulps of them (each way within 2, as both libraries bound them). Everything the
// same bits on 1 and 3 threads, and float64 gradients pass gradcheck.
BOOST_AUTO_TEST_CASE(rows_broadcast_matches_the_expanded_operand) {
  const int threads = num_threads();
  struct Case {
    const char* name;
    Binary op;
    bool exact;
  };
  const std::vector<Case> ops{{"add", add, true},  {"sub", sub, true},         {"mul", mul, true},
                              {"div", div, true},  {"maximum", maximum, true}, {"minimum", minimum, true},
                              {"pow", pow, false}, {"swiglu", swiglu, false}};
  // [a, b], the output the larger: b repeats, a repeats (with and without leading 1s),
  // several tasks either way.
  const std::vector<std::pair<Shape, Shape>> shapes{{{5, 3, 70}, {3, 70}}, {{1, 3, 70}, {4, 3, 70}},
                                                    {{70}, {6, 70}},       {{9, 2, 64}, {1, 1, 64}},
                                                    {{300, 64}, {64}},     {{8, 4096}, {4096}}};
  const double ulp = std::ldexp(1.0, -23);
  for (const auto& [a_shape, b_shape] : shapes)
    for (const auto& [name, op, exact] : ops) {
      BOOST_TEST_CHECKPOINT(name << " " << shape_str(a_shape) << " with " << shape_str(b_shape));
      Generator gen(7);
      // Positive operands for pow and div; a tie for maximum and minimum.
      Tensor a = Tensor::uniform(a_shape, 0.5, 2.0, gen), b = Tensor::uniform(b_shape, 0.5, 2.0, gen);
      a.data<float>()[1] = b.data<float>()[1];
      const Shape out_shape = numel(a_shape) >= numel(b_shape) ? a_shape : b_shape;
      const Tensor seed = Tensor::randn(out_shape, gen);
      const auto run = [&](bool expanded) {
        const Tensor ai = a.detach().requires_grad_(), bi = b.detach().requires_grad_();
        const Tensor out = expanded ? op(expand(ai, out_shape), expand(bi, out_shape)) : op(ai, bi);
        out.backward(seed);
        return std::vector<std::vector<double>>{out.to_vector(), ai.grad().to_vector(), bi.grad().to_vector()};
      };
      set_num_threads(1);
      const auto reference = run(true), first = run(false);
      const std::string what = std::string(name) + " " + shape_str(a_shape) + " with " + shape_str(b_shape);
      if (exact) {
        BOOST_TEST((first == reference), what << ": values and gradients as on the expanded operand");
      } else {
        std::size_t apart = 0;
        for (std::size_t i = 0; i < first[0].size(); ++i)
          apart += std::abs(first[0][i] - reference[0][i]) > 4 * ulp * std::abs(reference[0][i]);
        BOOST_TEST(apart == 0u, what << ": " << apart << " values more than 4 ulps from the expanded operand's");
      }
      set_num_threads(3);
      BOOST_TEST((run(false) == first), what << ": the same bits on 3 threads as on 1");
    }
  set_num_threads(threads);
  for (const Binary op : std::vector<Binary>{add, sub, mul, div, pow, swiglu}) {
    check_gradients([op](const Inputs& in) { return op(in[0], in[1]); },
                    {uniform64({3, 2, 40}, 0.5, 2.0, 8), uniform64({2, 40}, 0.5, 2.0, 9)});
    check_gradients([op](const Inputs& in) { return op(in[0], in[1]); },
                    {uniform64({1, 80}, 0.5, 2.0, 10), uniform64({3, 80}, 0.5, 2.0, 11)});
  }
}

BOOST_AUTO_TEST_CASE(broadcast_values) {
  Tensor a = Tensor::from_vector({1, 2, 3}, {3, 1}, DType::float64);
  Tensor b = Tensor::from_vector({10, 20}, {2}, DType::float64);
  Tensor c = a + b;
  BOOST_CHECK(c.shape() == (Shape{3, 2}));
  check_close(c.to_vector(), {11, 21, 12, 22, 13, 23});
}

BOOST_AUTO_TEST_CASE(scalar_variants_and_operators) {
  const Tensor x = uniform64({2, 3}, 0.5, 2.0, 8);
  check_gradients([](const Inputs& in) { return in[0] + 2.5; }, {x});
  check_gradients([](const Inputs& in) { return 2.5 - in[0]; }, {x});
  check_gradients([](const Inputs& in) { return in[0] - 2.5; }, {x});
  check_gradients([](const Inputs& in) { return 3.0 * in[0]; }, {x});
  check_gradients([](const Inputs& in) { return in[0] / 4.0; }, {x});
  check_gradients([](const Inputs& in) { return 2.0 / in[0]; }, {x});
  check_gradients([](const Inputs& in) { return -in[0]; }, {x});
  check_close((2.0 - Tensor::from_vector({0.5}, {1}, DType::float64)).to_vector(), {1.5});
  check_close((2.0 / Tensor::from_vector({0.5}, {1}, DType::float64)).to_vector(), {4.0});
}

BOOST_AUTO_TEST_CASE(pow_exp_log_sqrt_abs) {
  const Tensor pos = uniform64({2, 3}, 0.5, 2.0, 9);
  const Tensor any = randn64({2, 3}, 10);
  check_gradients([](const Inputs& in) { return pow(in[0], 3.0); }, {any});
  check_gradients([](const Inputs& in) { return pow(in[0], -1.5); }, {pos});
  check_gradients([](const Inputs& in) { return pow(in[0], in[1]); }, {pos, any});
  check_gradients([](const Inputs& in) { return pow(in[0], in[1]); }, {pos, uniform64({3}, -1, 1, 11)});
  check_gradients([](const Inputs& in) { return exp(in[0]); }, {any});
  check_gradients([](const Inputs& in) { return log(in[0]); }, {pos});
  check_gradients([](const Inputs& in) { return sqrt(in[0]); }, {pos});
  check_gradients([](const Inputs& in) { return abs(in[0]); }, {any});
  check_close(abs(Tensor::from_vector({-2, 0, 3}, {3}, DType::float64)).to_vector(), {2, 0, 3});
}

BOOST_AUTO_TEST_CASE(comparisons) {
  Tensor a = Tensor::from_vector({1, 2, 3}, {3}, DType::float64);
  Tensor b = Tensor::from_vector({2, 2, 2}, {3}, DType::float64);
  check_close(eq(a, b).to_vector(), {0, 1, 0});
  check_close(ne(a, b).to_vector(), {1, 0, 1});
  check_close(lt(a, b).to_vector(), {1, 0, 0});
  check_close(le(a, b).to_vector(), {1, 1, 0});
  check_close(gt(a, b).to_vector(), {0, 0, 1});
  check_close(ge(a, b).to_vector(), {0, 1, 1});
  check_close(eq(a, 3.0).to_vector(), {0, 0, 1});
  check_close(gt(a, 1.5).to_vector(), {0, 1, 1});
  BOOST_CHECK(!eq(randn64({3}, 1), 0.0).requires_grad());
}

BOOST_AUTO_TEST_CASE(where_and_masked_fill) {
  const Tensor a = randn64({2, 3}, 12), b = randn64({3}, 13);
  const Tensor cond = Tensor::from_vector({1, 0, 1, 0, 0, 1}, {2, 3}, DType::float32);
  check_gradients([cond](const Inputs& in) { return where(cond, in[0], in[1]); }, {a, b});
  Tensor w = where(cond, a, b);
  const auto av = a.to_vector(), bv = b.to_vector(), wv = w.to_vector();
  BOOST_CHECK_EQUAL(wv[0], av[0]);
  BOOST_CHECK_EQUAL(wv[1], bv[1]);

  // The Annotated Transformer's idiom: hide positions where mask == 0.
  const Tensor mask = Tensor::from_vector({1, 1, 0}, {1, 3}, DType::float64);
  Tensor filled = masked_fill(a, eq(mask, 0.0), -1e9);
  BOOST_CHECK_EQUAL(filled.to_vector()[2], -1e9);
  BOOST_CHECK_EQUAL(filled.to_vector()[0], av[0]);
  check_gradients([mask](const Inputs& in) { return masked_fill(in[0], eq(mask, 0.0), -1e9); }, {a});
  check_error([&] { masked_fill(b, cond, 0.0); }, {"masked_fill", "[2, 3]", "[3]"});

  // A condition of lower rank than the operands (xtensor's own where gets this wrong).
  const Tensor s3 = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {1, 2, 3}, DType::float64);
  const Tensor m2 = Tensor::from_vector({0, 1, 1, 0, 0, 1}, {2, 3}, DType::float64);
  check_close(masked_fill(s3, m2, -100).to_vector(), {1, -100, -100, 4, 5, -100});
  check_close(where(m2, s3, s3 * 0.0).to_vector(), {0, 2, 3, 0, 0, 6});
  check_gradients([m2](const Inputs& in) { return where(m2, in[0], in[1]); },
                  {randn64({4, 1, 2, 3}, 16), randn64({3}, 17)});
}

BOOST_AUTO_TEST_CASE(shape_and_dtype_errors_name_the_op) {
  const Tensor a = randn64({2, 3}, 14), b = randn64({4, 5}, 15);
  check_error([&] { add(a, b); }, {"add", "[2, 3]", "[4, 5]"});
  check_error([&] { mul(a, b); }, {"mul", "[2, 3]", "[4, 5]"});
  check_error([&] { div(a, b); }, {"div"});
  check_error([&] { sub(a, b); }, {"sub"});
  check_error([&] { pow(a, b); }, {"pow"});
  check_error([&] { where(a, a, b); }, {"where", "[2, 3]", "[4, 5]"});
  check_error([&] { add(a, a.to(DType::float32)); }, {"add", "float64", "float32"});
  check_error([&] { add(a, Tensor()); }, {"add", "undefined"});
}

BOOST_AUTO_TEST_CASE(sin_cos_erf) {
  const Tensor x = randn64({3, 4}, 31);
  check_gradients([](const Inputs& in) { return sin(in[0]); }, {x});
  check_gradients([](const Inputs& in) { return cos(in[0]); }, {x});
  check_gradients([](const Inputs& in) { return erf(in[0]); }, {x});
  const Tensor v = Tensor::from_vector({0.0, 1.0}, {2}, DType::float64);
  check_close(sin(v).to_vector(), {0.0, std::sin(1.0)});
  check_close(cos(v).to_vector(), {1.0, std::cos(1.0)});
  check_close(erf(v).to_vector(), {0.0, std::erf(1.0)});
}

BOOST_AUTO_TEST_CASE(clamp_bounds_gradient_and_nan) {
  const Tensor x = randn64({4, 5}, 32);
  check_gradients([](const Inputs& in) { return clamp(in[0], -0.3, 0.4); }, {x});
  check_gradients([](const Inputs& in) { return clamp(in[0], 0.2); }, {x});
  check_gradients([](const Inputs& in) { return clamp(in[0], std::nullopt, 0.1); }, {x});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor v = Tensor::from_vector({-2.0, -1.0, 0.5, 1.0, 3.0, nan}, {6}, DType::float64, true);
  const auto y = clamp(v, -1.0, 1.0).to_vector();
  check_close({y[0], y[1], y[2], y[3], y[4]}, {-1.0, -1.0, 0.5, 1.0, 1.0});
  BOOST_CHECK(std::isnan(y[5]));
  sum(clamp(v, -1.0, 1.0) * Tensor::from_vector({1, 1, 1, 1, 1, 0}, {6}, DType::float64)).backward();
  check_close(v.grad().to_vector(), {0.0, 1.0, 1.0, 1.0, 0.0, 0.0});  // both bounds included
  check_close({clamp(v, 2.0, -2.0).to_vector().front()}, {-2.0});     // min > max gives max
  check_error([&] { clamp(x, std::nullopt, std::nullopt); }, {"clamp", "min"});
  check_error([&] { clamp(x, nan); }, {"clamp", "NaN"});
}

BOOST_AUTO_TEST_CASE(minimum_maximum_broadcast_ties_and_nan) {
  const Tensor a = randn64({3, 4}, 33), b = randn64({4}, 34);
  check_gradients([](const Inputs& in) { return minimum(in[0], in[1]); }, {a, b});
  check_gradients([](const Inputs& in) { return maximum(in[0], in[1]); }, {a, b});
  // A tie sends half the gradient to each operand.
  const Tensor p = Tensor::from_vector({1.0, 2.0, 3.0}, {3}, DType::float64, true);
  const Tensor q = Tensor::from_vector({1.0, 5.0, 0.0}, {3}, DType::float64, true);
  sum(maximum(p, q)).backward();
  check_close(p.grad().to_vector(), {0.5, 0.0, 1.0});
  check_close(q.grad().to_vector(), {0.5, 1.0, 0.0});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor with_nan = Tensor::from_vector({nan, 1.0}, {2}, DType::float64);
  const Tensor ones = Tensor::ones({2}, DType::float64);
  BOOST_CHECK(std::isnan(minimum(with_nan, ones).to_vector()[0]));
  BOOST_CHECK(std::isnan(maximum(ones, with_nan).to_vector()[0]));
  check_error([&] { minimum(a, randn64({3}, 35)); }, {"minimum", "[3, 4]", "[3]"});
}

BOOST_AUTO_TEST_CASE(pow_gradients_at_zero_follow_pytorch) {
  // Exponent 0: gradient 0 (not 0 * 0^-1 = NaN); base 0 with exponent >= 0: no gradient
  // to the exponent (not 0 * log 0).
  Tensor x = Tensor::from_vector({0.0, 2.0}, {2}, DType::float64, true);
  sum(pow(x, 0.0)).backward();
  check_close(x.grad().to_vector(), {0.0, 0.0});
  Tensor base = Tensor::from_vector({0.0, 2.0, 0.0}, {3}, DType::float64, true);
  Tensor exponent = Tensor::from_vector({0.0, 0.0, 2.0}, {3}, DType::float64, true);
  sum(pow(base, exponent)).backward();
  check_close(base.grad().to_vector(), {0.0, 0.0, 0.0});
  check_close(exponent.grad().to_vector(), {0.0, std::log(2.0), 0.0});
  // Away from 0 the gradients are unchanged.
  check_gradients([](const Inputs& in) { return pow(in[0], in[1]); },
                  {uniform64({2, 3}, 0.5, 2.0, 7), uniform64({2, 3}, -1.0, 2.0, 8)});
}
