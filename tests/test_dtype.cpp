#define BOOST_TEST_MODULE dtype
// Every op in float32 agrees with the same op in float64 on random inputs to 1e-5,
// relative to the largest magnitude of the float64 result.
#include "helpers.hpp"

#include <functional>

using namespace xgrad;
using namespace xgrad::test;

using Inputs = std::vector<Tensor>;

namespace {

struct Case {
  const char* name;
  std::function<Tensor(const Inputs&)> f;
  std::vector<Tensor> inputs;  // float64
};

Tensor pos(Shape s, std::uint64_t seed) { return uniform64(std::move(s), 0.5, 2.0, seed, false); }
Tensor any(Shape s, std::uint64_t seed) { return randn64(std::move(s), seed, false); }

}  // namespace

BOOST_AUTO_TEST_CASE(float32_forward_matches_float64) {
  const Indices ids({0, 3, 1, 3}, {2, 2});
  const Indices targets({1, -100, 4, 0}, {2, 2});
  Generator dropout_gen(0);
  CrossEntropyOptions ce_options;
  ce_options.class_axis = 1;
  ce_options.label_smoothing = 0.1;
  ce_options.reduction = Reduction::none;
  const Indices gather_index({3, 0, 0, 2, 1, 1}, {2, 3});
  // A table, one case per line: kept as written.
  // clang-format off
  const std::vector<Case> cases = {
      {"add", [](const Inputs& in) { return in[0] + in[1]; }, {any({3, 1, 4}, 1), any({2, 4}, 2)}},
      {"sub", [](const Inputs& in) { return in[0] - in[1]; }, {any({3, 4}, 1), any({4}, 2)}},
      {"mul", [](const Inputs& in) { return in[0] * in[1]; }, {any({3, 4}, 1), any({3, 4}, 2)}},
      {"div", [](const Inputs& in) { return in[0] / in[1]; }, {any({3, 4}, 1), pos({3, 4}, 2)}},
      {"scalars", [](const Inputs& in) { return 2.0 - (in[0] * 3.0 + 1.0) / 4.0; }, {any({5}, 3)}},
      {"rdiv", [](const Inputs& in) { return 2.0 / in[0]; }, {pos({5}, 3)}},
      {"pow", [](const Inputs& in) { return pow(in[0], 2.5); }, {pos({5}, 4)}},
      {"pow_tensor", [](const Inputs& in) { return pow(in[0], in[1]); }, {pos({5}, 4), any({5}, 5)}},
      {"exp", [](const Inputs& in) { return exp(in[0]); }, {any({5}, 6)}},
      {"log", [](const Inputs& in) { return log(in[0]); }, {pos({5}, 7)}},
      {"sqrt", [](const Inputs& in) { return sqrt(in[0]); }, {pos({5}, 8)}},
      {"abs", [](const Inputs& in) { return abs(in[0]); }, {any({5}, 9)}},
      {"where", [](const Inputs& in) { return where(gt(in[0], 0.0), in[0], in[1]); }, {any({4}, 10), any({4}, 11)}},
      {"masked_fill", [](const Inputs& in) { return masked_fill(in[0], lt(in[0], 0.0), -1e9); }, {any({4}, 12)}},
      {"tanh", [](const Inputs& in) { return tanh(in[0]); }, {any({6}, 13)}},
      {"sigmoid", [](const Inputs& in) { return sigmoid(in[0]); }, {any({6}, 14)}},
      {"relu", [](const Inputs& in) { return relu(in[0]); }, {any({6}, 15)}},
      {"gelu", [](const Inputs& in) { return gelu(in[0]); }, {any({6}, 16)}},
      {"gelu_tanh", [](const Inputs& in) { return gelu(in[0], true); }, {any({6}, 17)}},
      {"softmax", [](const Inputs& in) { return softmax(in[0], 1); }, {any({2, 5, 3}, 18)}},
      {"log_softmax", [](const Inputs& in) { return log_softmax(in[0]); }, {any({2, 5, 3}, 19)}},
      {"dropout", [&](const Inputs& in) { dropout_gen.seed(3); return dropout(in[0], 0.25, true, dropout_gen); }, {any({20}, 20)}},
      {"sum", [](const Inputs& in) { return sum(in[0], {0, 2}); }, {any({3, 4, 5}, 21)}},
      {"mean", [](const Inputs& in) { return mean(in[0], {1}, true); }, {any({3, 4, 5}, 22)}},
      {"max", [](const Inputs& in) { return max(in[0], {-1}); }, {any({3, 4, 5}, 23)}},
      {"matmul", [](const Inputs& in) { return matmul(in[0], in[1]); }, {any({2, 1, 8, 16}, 24), any({3, 16, 4}, 25)}},
      {"matmul_t", [](const Inputs& in) { return matmul(in[0], in[1], true, true); }, {any({16, 8}, 26), any({4, 16}, 27)}},
      {"linear", [](const Inputs& in) { return linear(in[0], in[1], in[2]); }, {any({2, 3, 16}, 36), any({8, 16}, 37), any({8}, 38)}},
      {"layer_norm", [](const Inputs& in) { return layer_norm(in[0], in[1], in[2]); }, {any({4, 16}, 39), any({16}, 40), any({16}, 41)}},
      {"layer_norm 2 axes", [](const Inputs& in) { return layer_norm(in[0], in[1], in[2]); }, {any({3, 4, 8}, 60), any({4, 8}, 61), any({4, 8}, 62)}},
      {"rms_norm", [](const Inputs& in) { return rms_norm(in[0], {4, 8}, in[1], 1e-6); }, {any({3, 4, 8}, 63), any({4, 8}, 64)}},
      {"reshape", [](const Inputs& in) { return reshape(in[0], {-1, 2}); }, {any({3, 4}, 28)}},
      {"permute", [](const Inputs& in) { return permute(in[0], {2, 0, 1}); }, {any({2, 3, 4}, 29)}},
      {"slice", [](const Inputs& in) { return slice(in[0], 1, 1, 4, 2); }, {any({2, 5}, 30)}},
      {"concat", [](const Inputs& in) { return concat({in[0], in[1]}, 0); }, {any({2, 3}, 31), any({1, 3}, 32)}},
      {"expand", [](const Inputs& in) { return expand(in[0], {4, 3}); }, {any({3}, 33)}},
      {"embedding", [&](const Inputs& in) { return embedding(in[0], ids); }, {any({4, 3}, 34)}},
      {"cross_entropy", [&](const Inputs& in) { return cross_entropy(in[0], targets); }, {any({2, 2, 5}, 35)}},
      {"cross_entropy options", [&](const Inputs& in) { return cross_entropy(in[0], targets, ce_options); }, {any({2, 5, 2}, 65)}},
      {"cross_entropy soft", [](const Inputs& in) { return cross_entropy(in[0], softmax(in[1])); }, {any({3, 5}, 66), any({3, 5}, 67)}},
      {"silu", [](const Inputs& in) { return silu(in[0]); }, {any({6}, 68)}},
      {"softplus", [](const Inputs& in) { return softplus(in[0], 2.0, 3.0); }, {any({8}, 69)}},
      {"clamp", [](const Inputs& in) { return clamp(in[0], -0.5, 0.5); }, {any({8}, 70)}},
      {"minimum", [](const Inputs& in) { return minimum(in[0], in[1]); }, {any({3, 4}, 71), any({4}, 72)}},
      {"maximum", [](const Inputs& in) { return maximum(in[0], in[1]); }, {any({3, 4}, 73), any({4}, 74)}},
      {"sin", [](const Inputs& in) { return sin(in[0]); }, {any({6}, 75)}},
      {"cos", [](const Inputs& in) { return cos(in[0]); }, {any({6}, 76)}},
      {"erf", [](const Inputs& in) { return erf(in[0]); }, {any({6}, 77)}},
      {"cumsum", [](const Inputs& in) { return cumsum(in[0], 1); }, {any({3, 5}, 78)}},
      {"var", [](const Inputs& in) { return var(in[0], {1}); }, {any({3, 5}, 79)}},
      {"stddev", [](const Inputs& in) { return stddev(in[0], 0); }, {any({3, 5}, 80)}},
      {"gather", [&](const Inputs& in) { return gather(in[0], 1, gather_index); }, {any({2, 4}, 81)}},
      {"index_select", [&](const Inputs& in) { return index_select(in[0], 0, Indices({1, 1, 0}, {3})); }, {any({2, 4}, 82)}},
      {"pad", [](const Inputs& in) { return pad(in[0], {1, -1, 2, 0}, 0.5); }, {any({2, 4}, 83)}},
      {"triu", [](const Inputs& in) { return triu(in[0], 1); }, {any({2, 3, 4}, 84)}},
      {"tril", [](const Inputs& in) { return tril(in[0], -1); }, {any({2, 3, 4}, 85)}},
      {"swiglu", [](const Inputs& in) { return swiglu(in[0], in[1]); }, {any({3, 4}, 86), any({4}, 87)}},
      {"rope", [](const Inputs& in) { return rope(in[0], {.theta = 500.0, .offset = 3}); }, {any({2, 5, 8}, 88)}},
      {"rope columns", [](const Inputs& in) { return rope({in[0], 4, 8}, 2); }, {any({2, 5, 16}, 89)}},
  };
  // clang-format on
  for (const Case& c : cases) {
    std::vector<Tensor> single;
    for (const Tensor& t : c.inputs) single.push_back(t.to(DType::float32));
    const Tensor out64 = c.f(c.inputs), out32 = c.f(single);
    BOOST_CHECK_MESSAGE(out32.dtype() == DType::float32, c.name << " changed the dtype");
    const auto ref = out64.to_vector(), got = out32.to_vector();
    BOOST_REQUIRE_EQUAL(ref.size(), got.size());
    double scale = 1e-30, worst = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      scale = std::max(scale, std::abs(ref[i]));
      worst = std::max(worst, std::abs(ref[i] - got[i]));
    }
    BOOST_CHECK_MESSAGE(worst <= 1e-5 * scale,
                        c.name << ": float32 differs by " << worst << " (scale " << scale << ")");
  }
}

BOOST_AUTO_TEST_CASE(cast_is_an_op_whose_gradient_returns_in_the_source_dtype) {
  const Tensor x = randn64({2, 3}, 7);
  const Tensor y = cast(x, DType::float32);
  BOOST_CHECK(y.dtype() == DType::float32);
  BOOST_CHECK_EQUAL(std::string(y.op_name()), "cast");
  BOOST_CHECK(cast(x, DType::float64).node() == x.node());  // same dtype: the tensor itself
  sum(y * 2.0).backward();
  BOOST_REQUIRE(x.grad().defined());
  BOOST_CHECK(x.grad().dtype() == DType::float64);
  for (double g : x.grad().to_vector()) BOOST_CHECK_EQUAL(g, 2.0);
  // float64 -> float64 is the identity op: gradcheck through Tensor::to as well.
  check_gradients([](const Inputs& in) { return in[0].to(DType::float64) * 3.0; }, {x});
  check_error([] { cast(Tensor(), DType::float32); }, {"cast", "undefined"});
}
