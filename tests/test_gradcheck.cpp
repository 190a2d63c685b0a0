#define BOOST_TEST_MODULE gradcheck
#include "helpers.hpp"

using namespace xgrad;
using namespace xgrad::test;

using Inputs = std::vector<Tensor>;

BOOST_AUTO_TEST_CASE(passes_a_correct_composite_function) {
  // A small MLP-like function of three inputs.
  BOOST_CHECK(gradcheck([](const Inputs& in) { return sum(tanh(matmul(in[0], in[1]) + in[2]), {0}); },
                        {randn64({3, 4}, 1), randn64({4, 2}, 2), randn64({2}, 3)}));
}

BOOST_AUTO_TEST_CASE(catches_a_wrong_gradient_and_reports_where) {
  // x * detach(x): the graph sees only one factor, so backward gives x instead of 2x.
  const Tensor x = Tensor::from_vector({1.0, 2.0}, {2}, DType::float64, true);
  const auto wrong = [](const Inputs& in) { return in[0] * in[0].detach(); };
  BOOST_CHECK(!gradcheck(wrong, {x}, GradcheckOptions{.raise = false}));
  try {
    gradcheck(wrong, {x});
    BOOST_ERROR("gradcheck accepted a wrong gradient");
  } catch (const GradcheckError& e) {
    const std::string report = e.what();
    for (const char* part : {"input 0", "element [0]", "analytic 1", "numeric 2"})
      BOOST_CHECK_MESSAGE(report.find(part) != std::string::npos, report << " lacks " << part);
  }
}

BOOST_AUTO_TEST_CASE(checks_float32_inputs_in_float64) {
  Generator gen(4);
  Tensor x = Tensor::randn({3}, gen, DType::float32).requires_grad_();
  BOOST_CHECK(gradcheck(
      [](const Inputs& in) {
        BOOST_CHECK(in[0].dtype() == DType::float64);
        return exp(in[0]);
      },
      {x}));
  BOOST_CHECK(!x.grad().defined());  // the caller's tensors are left alone
}

BOOST_AUTO_TEST_CASE(only_inputs_that_require_grad_are_checked) {
  const Tensor constant = randn64({3}, 5, false);
  BOOST_CHECK(gradcheck([](const Inputs& in) { return in[0] * in[1]; }, {randn64({3}, 6), constant}));
  check_error([&] { gradcheck([](const Inputs& in) { return in[0]; }, {constant}); }, {"gradcheck", "requires_grad"});
}

BOOST_AUTO_TEST_CASE(an_output_independent_of_an_input_has_zero_jacobian) {
  BOOST_CHECK(gradcheck([](const Inputs& in) { return in[0] * 2.0; }, {randn64({2}, 7), randn64({2}, 8)}));
}

BOOST_AUTO_TEST_CASE(a_function_that_leaves_float64_is_refused) {
  check_error([] { gradcheck([](const Inputs& in) { return in[0].to(DType::float32); }, {randn64({2}, 9)}); },
              {"gradcheck", "float32"});
}

// The example in the README, kept compiling and passing here.
namespace {
Tensor my_layer(const std::vector<Tensor>& in) {
  const Tensor &x = in[0], &w = in[1], &b = in[2];
  return gelu(matmul(x, w, /*transpose_a=*/false, /*transpose_b=*/true) + b);
}
}  // namespace

BOOST_AUTO_TEST_CASE(readme_example) {
  Generator gen(0);
  Tensor x = Tensor::randn({4, 3}, gen, DType::float64).requires_grad_();
  Tensor w = Tensor::randn({5, 3}, gen, DType::float64).requires_grad_();
  Tensor b = Tensor::randn({5}, gen, DType::float64);
  BOOST_CHECK(gradcheck(my_layer, {x, w, b}));
}
