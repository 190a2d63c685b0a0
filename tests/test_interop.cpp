#define BOOST_TEST_MODULE interop
// Tensors from xtensor arrays and back (the only suite that includes xtensor).
#include "helpers.hpp"

#include "xgrad/autograd/xtensor.hpp"

using namespace xgrad;
using namespace xgrad::test;

BOOST_AUTO_TEST_CASE(from_xarray_and_back) {
  xt::xarray<float> a = {{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}};
  Tensor t = from_xarray(a, /*requires_grad=*/true);
  BOOST_CHECK(t.dtype() == DType::float32);
  BOOST_CHECK(t.shape() == (Shape{2, 3}));
  BOOST_CHECK(t.requires_grad());
  BOOST_CHECK(as_xarray<float>(t) == a);

  sum(t * t).backward();
  BOOST_CHECK(as_xarray<float>(t.grad()) == xt::xarray<float>(2.0f * a));

  const xt::xarray<double> converted = to_xarray<double>(t);  // converting copy
  BOOST_CHECK_EQUAL(converted(1, 2), 6.0);
  check_error([&] { as_xarray<double>(t); }, {"as_xarray", "float64", "float32"});
}

BOOST_AUTO_TEST_CASE(as_xarray_reads_the_tensor_in_place) {
  Tensor t = Tensor::zeros({3}, DType::float64);
  t.data<double>()[1] = 5.0;
  BOOST_CHECK_EQUAL(as_xarray<double>(t)(1), 5.0);
}
