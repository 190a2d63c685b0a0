#define BOOST_TEST_MODULE shape
#include "helpers.hpp"

using namespace xgrad;
using namespace xgrad::test;

using Inputs = std::vector<Tensor>;

BOOST_AUTO_TEST_CASE(reshape_unsqueeze_squeeze) {
  const Tensor x = randn64({2, 3, 4}, 1);
  BOOST_CHECK(reshape(x, {6, -1}).shape() == (Shape{6, 4}));
  BOOST_CHECK(reshape(x, {-1}).shape() == (Shape{24}));
  check_close(reshape(x, {4, 6}).to_vector(), x.to_vector());
  check_gradients([](const Inputs& in) { return reshape(in[0], {4, -1}) * 2.0; }, {x});
  BOOST_CHECK(unsqueeze(x, 0).shape() == (Shape{1, 2, 3, 4}));
  BOOST_CHECK(unsqueeze(x, -1).shape() == (Shape{2, 3, 4, 1}));
  BOOST_CHECK(squeeze(unsqueeze(x, 1), 1).shape() == x.shape());
  check_gradients([](const Inputs& in) { return squeeze(unsqueeze(in[0], 2), -2) * 2.0; }, {x});
  check_error([&] { reshape(x, {5, -1}); }, {"reshape", "[2, 3, 4]", "24"});
  check_error([&] { reshape(x, {-1, -1}); }, {"reshape", "-1"});
  check_error([&] { squeeze(x, 0); }, {"squeeze", "[2, 3, 4]", "size 2"});
}

BOOST_AUTO_TEST_CASE(reshape_to_a_shape) {
  const Tensor x = randn64({2, 3, 4}, 3);
  const Shape target{4, 6};
  BOOST_CHECK(reshape(x, target).shape() == target);
  BOOST_CHECK(reshape(x, target).to_vector() == reshape(x, {4, 6}).to_vector());
  check_gradients([&](const Inputs& in) { return reshape(in[0], target) * 3.0; }, {x});
  check_error([&] { reshape(x, Shape{5, 5}); }, {"reshape", "[2, 3, 4]", "24", "[5, 5]"});
  check_error([&] { reshape(Tensor(), Shape{1}); }, {"reshape", "undefined"});
}

BOOST_AUTO_TEST_CASE(permute_and_transpose) {
  const Tensor x = Tensor::from_vector({0, 1, 2, 3, 4, 5}, {2, 3}, DType::float64);
  check_close(transpose(x, 0, 1).to_vector(), {0, 3, 1, 4, 2, 5});
  const Tensor y = randn64({2, 3, 4}, 2);
  BOOST_CHECK(permute(y, {2, 0, 1}).shape() == (Shape{4, 2, 3}));
  check_gradients([](const Inputs& in) { return permute(in[0], {2, 0, 1}); }, {y});
  check_gradients([](const Inputs& in) { return transpose(in[0], -1, 0); }, {y});
  check_error([&] { permute(y, {0, 0, 1}); }, {"permute", "twice"});
  check_error([&] { permute(y, {0, 1}); }, {"permute", "[2, 3, 4]"});
}

BOOST_AUTO_TEST_CASE(slice_values_and_gradients) {
  const Tensor x = Tensor::from_vector({0, 1, 2, 3, 4, 5, 6, 7}, {2, 4}, DType::float64);
  check_close(slice(x, 1, 1, 3).to_vector(), {1, 2, 5, 6});
  check_close(slice(x, -1, 0, 4, 2).to_vector(), {0, 2, 4, 6});
  check_close(slice(x, 0, 1, 100).to_vector(), {4, 5, 6, 7});  // end is clamped
  BOOST_CHECK(slice(x, 1, 2, 2).shape() == (Shape{2, 0}));
  const Tensor y = randn64({3, 5, 2}, 3);
  check_gradients([](const Inputs& in) { return slice(in[0], 1, 1, 5, 2); }, {y});
  // Overlapping slices accumulate into the same input.
  check_gradients([](const Inputs& in) { return slice(in[0], 1, 0, 3) * slice(in[0], 1, 2, 5); }, {y});
  check_error([&] { slice(y, 1, 6, 7); }, {"slice", "[3, 5, 2]"});
  check_error([&] { slice(y, 3, 0, 1); }, {"slice", "axis 3"});
}

BOOST_AUTO_TEST_CASE(concat_split_chunk) {
  const Tensor a = randn64({2, 3}, 4), b = randn64({2, 1}, 5), c = randn64({2, 2}, 6);
  const Tensor joined = concat({a, b, c}, 1);
  BOOST_CHECK(joined.shape() == (Shape{2, 6}));
  check_close(slice(joined, 1, 3, 4).to_vector(), b.to_vector());
  check_gradients([](const Inputs& in) { return concat({in[0], in[1], in[2]}, -1); }, {a, b, c});
  check_gradients([](const Inputs& in) { return concat({in[0], in[0]}, 0); }, {a});

  const auto parts = split(joined, {3, 1, 2}, 1);
  BOOST_REQUIRE_EQUAL(parts.size(), 3u);
  check_close(parts[0].to_vector(), a.to_vector());
  check_close(parts[2].to_vector(), c.to_vector());
  check_gradients(
      [](const Inputs& in) {
        auto p = split(in[0], {1, 2}, 0);
        return concat({p[1], p[0] * 3.0}, 0);
      },
      {randn64({3, 2}, 7)});
  const auto thirds = chunk(randn64({6, 2}, 8), 3, 0);
  BOOST_CHECK(thirds.size() == 3 && thirds[1].shape() == (Shape{2, 2}));
  check_error([&] { concat({a, randn64({3, 3}, 9)}, 1); }, {"concat", "[3, 3]", "[2, 3]"});
  check_error([&] { split(a, {1, 1}, 1); }, {"split", "[2, 3]"});
  check_error([&] { chunk(a, 2, 1); }, {"chunk", "[2, 3]"});
}

BOOST_AUTO_TEST_CASE(expand_broadcasts_and_sums_back) {
  const Tensor x = randn64({3, 1}, 10);
  const Tensor e = expand(x, {2, 3, 4});
  BOOST_CHECK(e.shape() == (Shape{2, 3, 4}));
  BOOST_CHECK_EQUAL(e.to_vector()[5], x.to_vector()[1]);
  check_gradients([](const Inputs& in) { return expand(in[0], {2, 3, 4}); }, {x});
  check_error([&] { expand(x, {2, 4}); }, {"expand", "[3, 1]", "[2, 4]"});
}

BOOST_AUTO_TEST_CASE(pad_grows_and_crops) {
  const Tensor x = randn64({2, 3, 4}, 51);
  check_gradients([](const Inputs& in) { return pad(in[0], {1, 2}, 0.5); }, {x});
  check_gradients([](const Inputs& in) { return pad(in[0], {1, -1, 2, 0}); }, {x});
  check_gradients([](const Inputs& in) { return pad(in[0], {0, 1, 1, 0, 2, 1}, -3.0); }, {x});
  const Tensor m = Tensor::from_vector({1, 2, 3, 4}, {2, 2}, DType::float64);
  check_close(pad(m, {1, 0, 0, 1}, 9.0).to_vector(), {9, 1, 2, 9, 3, 4, 9, 9, 9});
  BOOST_CHECK(pad(m, {-1, -1}).shape() == (Shape{2, 0}));
  BOOST_CHECK(pad(m, {}).shape() == (Shape{2, 2}));
  check_error([&] { pad(m, {1}); }, {"pad", "pairs", "[2, 2]"});
  check_error([&] { pad(m, {1, 1, 1, 1, 1, 1}); }, {"pad", "2 axes"});
  check_error([&] { pad(m, {-2, -1}); }, {"pad", "-1 elements"});
}

BOOST_AUTO_TEST_CASE(triu_and_tril) {
  const Tensor x = randn64({2, 4, 5}, 52);
  for (std::int64_t diagonal : {-5, -1, 0, 2, 7}) {
    check_gradients([diagonal](const Inputs& in) { return triu(in[0], diagonal); }, {x});
    check_gradients([diagonal](const Inputs& in) { return tril(in[0], diagonal); }, {x});
  }
  const Tensor m = Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}, DType::float64);
  check_close(triu(m).to_vector(), {1, 2, 3, 0, 5, 6, 0, 0, 9});
  check_close(tril(m, -1).to_vector(), {0, 0, 0, 4, 0, 0, 7, 8, 0});
  // triu(d) + tril(d - 1) is the whole matrix.
  check_close(add(triu(x, 1), tril(x, 0)).to_vector(), x.to_vector());
  check_error([&] { triu(Tensor::ones({3})); }, {"triu", "matrix", "[3]"});
}

BOOST_AUTO_TEST_CASE(gather_and_index_select) {
  const Tensor x = randn64({3, 4, 5}, 53);
  const Indices along1({0, 3, 3, 1, 2, 0, 1, 1, 2, 3, 0, 0, 1, 2, 3, 3, 2, 1}, {3, 2, 3});
  check_gradients([&](const Inputs& in) { return gather(in[0], 1, along1); }, {x});
  const Indices last({4, 0, 4, 4, 1, 2}, {1, 2, 3});
  check_gradients([&](const Inputs& in) { return gather(in[0], -1, last); }, {x});
  const Indices rows({2, 0, 2}, {3});
  check_gradients([&](const Inputs& in) { return index_select(in[0], 0, rows); }, {x});
  check_gradients([&](const Inputs& in) { return index_select(in[0], 2, Indices({4, 4, 1}, {3})); }, {x});
  const Tensor m = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, DType::float64);
  check_close(gather(m, 1, Indices({2, 0, 1, 1}, {2, 2})).to_vector(), {3, 1, 5, 5});
  check_close(index_select(m, 1, Indices({2, 2, 0}, {3})).to_vector(), {3, 3, 1, 6, 6, 4});
  BOOST_CHECK(index_select(m, 0, Indices({}, {0})).shape() == (Shape{0, 3}));
  check_error([&] { gather(m, 1, Indices({3}, {1, 1})); }, {"gather", "index 3", "[0, 3)", "[2, 3]"});
  check_error([&] { gather(m, 1, Indices({0, 1}, {2})); }, {"gather", "[2]", "as many axes"});
  check_error([&] { gather(m, 1, Indices({0, 0, 0}, {3, 1})); }, {"gather", "larger", "axis 0"});
  check_error([&] { index_select(m, 0, Indices({-1}, {1})); }, {"index_select", "index -1", "[0, 2)"});
  check_error([&] { index_select(m, 0, Indices({0, 1}, {1, 2})); }, {"index_select", "1-D", "[1, 2]"});
}

BOOST_AUTO_TEST_CASE(indices_from_and_to_tensors) {
  const Tensor t = Tensor::from_vector({3, 0, -2, 7}, {2, 2}, DType::float32);
  const Indices ids = to_indices(t);
  BOOST_CHECK(ids.values == (std::vector<std::int64_t>{3, 0, -2, 7}));
  BOOST_CHECK(ids.shape == (Shape{2, 2}));
  check_close(to_tensor(ids, DType::float64).to_vector(), {3, 0, -2, 7});
  BOOST_CHECK(to_tensor(ids).dtype() == DType::float32);
  check_error([] { to_indices(Tensor::from_vector({1.5}, {1})); }, {"to_indices", "1.5", "whole number"});
  check_error([] { to_indices(Tensor::from_vector({1e300}, {1}, DType::float64)); }, {"to_indices", "2^53"});
  check_error([] { to_tensor(Indices({(1 << 24) + 1}, {1}), DType::float32); }, {"to_tensor", "float32"});
}

BOOST_AUTO_TEST_CASE(sizes_near_the_limits_are_exact_or_errors) {
  const Tensor x = Tensor::from_vector({1, 2, 3}, {3});
  const Tensor first = slice(x, 0, 0, 3, SIZE_MAX);  // a step past the end still takes the start
  BOOST_CHECK(first.shape() == Shape{1});
  BOOST_CHECK_EQUAL(first.item(), 1.0);
  BOOST_CHECK(slice(x, 0, 1, 3, std::size_t{1} << 63).shape() == Shape{1});
  check_error([&] { pad(x, {INT64_MAX, INT64_MAX}); }, {"pad", "2^63"});
  check_error([&] { pad(x, {0, std::int64_t{1} << 40}); }, {"pad", "allocate"});
  check_error([&] { expand(Tensor::ones({1}), {std::size_t{1} << 40, std::size_t{1} << 20}); }, {"expand", "allocate"});
}

BOOST_AUTO_TEST_CASE(empty_tensors_with_a_long_other_axis_return_at_once) {
  // No elements, so no work: these once walked the 2^50 rows of nothing.
  const Tensor empty = Tensor::zeros({std::size_t{1} << 50, 0});
  BOOST_CHECK(softmax(empty, 1).shape() == empty.shape());
  BOOST_CHECK(log_softmax(empty, 1).shape() == empty.shape());
  BOOST_CHECK(slice(empty, 1, 0, 0).shape() == empty.shape());
  BOOST_CHECK(concat({empty, empty}, 1).shape() == empty.shape());
  Tensor x = Tensor::zeros({std::size_t{1} << 50, 0}, DType::float64).requires_grad_();
  sum(softmax(x, 1)).backward();
  BOOST_CHECK(x.grad().shape() == x.shape());
}
