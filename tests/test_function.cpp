#define BOOST_TEST_MODULE function
// Custom ops defined with CustomOp: their gradients flow, gradcheck can check them, and
// a backward that returns the wrong thing is an error naming the op.
#include "helpers.hpp"

#include "xgrad/autograd/function.hpp"

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
