#define BOOST_TEST_MODULE function
// Custom ops defined with CustomOp: their gradients flow, gradcheck can check them, and
// a backward that returns the wrong thing is an error naming the op.
#include "helpers.hpp"

#include "xgrad/autograd/function.hpp"
#include "xgrad/autograd/recompute.hpp"

using namespace xgrad;
using namespace xgrad::test;

using Inputs = std::vector<Tensor>;

namespace {

// x * y^2, with a hand-written backward.
const CustomOp x_times_y_squared{"x_times_y_squared", [](const Inputs& in) { return in[0] * in[1] * in[1]; },
                                 [](const Inputs& in, const Tensor&, const Tensor& g) {
                                   return Inputs{g * in[1] * in[1], g * 2.0 * in[0] * in[1]};
                                 }};

}  // namespace

BOOST_AUTO_TEST_CASE(a_custom_op_is_differentiable_and_checkable) {
  const Tensor x = randn64({2, 3}, 1), y = randn64({2, 3}, 2);
  const Tensor z = apply(x_times_y_squared, {x, y});
  BOOST_CHECK_EQUAL(std::string(z.op_name()), "x_times_y_squared");
  check_close(z.to_vector(), (x * y * y).to_vector());
  check_gradients([](const Inputs& in) { return apply(x_times_y_squared, in); }, {x, y});
  // Composed with ordinary ops on both sides.
  check_gradients([](const Inputs& in) { return tanh(apply(x_times_y_squared, {exp(in[0]), in[1]})) * in[0]; }, {x, y});
}

BOOST_AUTO_TEST_CASE(a_wrong_backward_is_caught) {
  const CustomOp wrong{"wrong", [](const Inputs& in) { return in[0] * in[0]; },
                       [](const Inputs& in, const Tensor&, const Tensor& g) { return Inputs{g * in[0]}; }};
  BOOST_CHECK(!gradcheck([&](const Inputs& in) { return apply(wrong, in); }, {randn64({3}, 3)},
                         GradcheckOptions{.raise = false}));
  const CustomOp bad_shape{"bad_shape", [](const Inputs& in) { return in[0] * 2.0; },
                           [](const Inputs&, const Tensor&, const Tensor&) { return Inputs{Tensor::ones({5})}; }};
  check_error([&] { sum(apply(bad_shape, {randn64({3}, 4)})).backward(); },
              {"bad_shape", "float32 [5]", "float64 [3]"});
  const CustomOp too_few{"too_few", [](const Inputs& in) { return in[0] + in[1]; },
                         [](const Inputs&, const Tensor&, const Tensor& g) { return Inputs{g}; }};
  check_error(
      [&] {
        sum(apply(too_few, {randn64({3}, 5), randn64({3}, 6)})).backward();
      },
      {"too_few", "1 gradients for 2 inputs"});
}

BOOST_AUTO_TEST_CASE(no_graph_without_grad) {
  const Tensor x = randn64({3}, 7, false);
  BOOST_CHECK(!apply(x_times_y_squared, {x, x}).requires_grad());
  NoGradGuard guard;
  BOOST_CHECK(!apply(x_times_y_squared, {randn64({3}, 8), x}).requires_grad());
}

// The call as the header and README write it, from every kind of argument: a std::vector
// brings std::apply into the lookup, which a non-const op or vector matched better.
BOOST_AUTO_TEST_CASE(apply_is_called_from_any_op_and_vector) {
  CustomOp op = x_times_y_squared;
  const CustomOp& const_op = op;
  Inputs inputs{randn64({3}, 9), randn64({3}, 10)};
  const Inputs& const_inputs = inputs;
  const std::vector<double> expected = (inputs[0] * inputs[1] * inputs[1]).to_vector();
  for (const Tensor& out :
       {apply(op, inputs), apply(const_op, inputs), apply(op, const_inputs), apply(const_op, const_inputs),
        apply(op, Inputs(inputs)), op.apply(inputs), const_op.apply({inputs[0], inputs[1]})})
    BOOST_CHECK(out.to_vector() == expected);
  check_gradients([&](auto& in) { return apply(op, in); }, inputs);
  check_gradients([&](auto& in) { return op.apply(in); }, inputs);
}

// A raw float32 loop in a custom forward runs in the mode of xgrad's own ops: denormals
// flushed, as in the backward. So a product through a denormal gives the backward's
// number, and recompute() (the forward again, inside backward) the same gradients.
BOOST_AUTO_TEST_CASE(a_custom_forward_flushes_denormals_as_its_backward_does) {
  const auto through_a_denormal = [](const Tensor& x) {
    Tensor out = Tensor::zeros(x.shape(), x.dtype());
    dispatch(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      volatile T tiny = T(1e-30), scale = T(1e-10), back = T(1e38);  // 1e-40 is denormal in float32
      for (std::size_t i = 0; i < x.numel(); ++i) out.data<T>()[i] = x.data<T>()[i] + tiny * scale * back;
    });
    return out;
  };
  const CustomOp op{"through_a_denormal", [&](const Inputs& in) { return through_a_denormal(in[0]); },
                    [&](const Inputs&, const Tensor&, const Tensor& g) { return Inputs{g * 1.0}; }};
  const Tensor x = Tensor::zeros({2}, DType::float32);
  BOOST_CHECK_EQUAL(op.apply({x}).to_vector()[0], 0.0);       // 1e-30 * 1e-10 flushed to 0
  BOOST_CHECK_GT(through_a_denormal(x).to_vector()[0], 0.0);  // outside xgrad: the caller's mode
  const Tensor x64 = Tensor::zeros({2}, DType::float64);
  BOOST_CHECK_CLOSE(op.apply({x64}).to_vector()[0], 0.01, 1e-9);  // float64 untouched

  // exp(1e38 y): 1.01 where y kept 1e-40, 1 where it was flushed.
  const auto fn = [&](const Inputs& in) { return exp(op.apply({in[0]}) * 1e38); };
  const auto gradient = [&](bool recomputed) {
    Tensor leaf = Tensor::zeros({2}, DType::float32).requires_grad_();
    sum(recomputed ? recompute(fn, {leaf * 1.0}) : fn({leaf * 1.0})).backward();
    return leaf.grad().to_vector();
  };
  BOOST_CHECK(gradient(false) == gradient(true));
  BOOST_CHECK_EQUAL(gradient(false)[0], 1e38f);
}
