#define BOOST_TEST_MODULE distributed
// xgrad::distributed in one process (a world of one, no MPI): the gradient reducer's
// buckets and its arithmetic, which is the reference every job size must equal.
#include "helpers.hpp"

#include "xgrad/distributed/communicator.hpp"
#include "xgrad/distributed/reducer.hpp"
#include "xgrad/nn/nn.hpp"

#include <cstdio>

using namespace xgrad;
using namespace xgrad::test;

namespace {

struct TwoLayers : nn::Module {
  TwoLayers() {
    first = register_module("first", std::make_shared<nn::Linear>(4, 8));
    unused = register_module("unused", std::make_shared<nn::Linear>(2, 2));
    second = register_module("second", std::make_shared<nn::Linear>(8, 3));
  }
  Tensor forward(const Tensor& x) override { return second->forward(relu(first->forward(x))); }
  std::shared_ptr<nn::Linear> first, unused, second;
};

std::vector<Tensor> gradients_of(const nn::Module& m) {
  std::vector<Tensor> g;
  for (const auto& [name, p] : m.named_parameters()) g.push_back(p.grad().defined() ? p.grad().clone() : Tensor());
  return g;
}

}  // namespace

BOOST_AUTO_TEST_CASE(alone_there_is_no_mpi_and_one_rank) {
  const distributed::Communicator world;
  BOOST_CHECK(!world.uses_mpi());
  BOOST_CHECK_EQUAL(world.rank(), 0);
  BOOST_CHECK_EQUAL(world.size(), 1);
  BOOST_CHECK(world.is_root());
  BOOST_CHECK(world.any(true) && !world.any(false));
  BOOST_CHECK(world.all_gather({1.5, 2.5}) == (std::vector<double>{1.5, 2.5}));
  world.barrier();
  check_error([&] { world.send("x", 1, 0, 0); }, {"send", "mpirun"});
  // Rank 0 (alone: this process) writes.
  nn::Linear layer(2, 2);
  const std::string path = "test_distributed_root.safetensors";
  distributed::save_on_root(world, path, layer);
  nn::Linear other(2, 2);
  nn::load(path, other);
  BOOST_CHECK(other.weight.to_vector() == layer.weight.to_vector());
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_CASE(buckets_follow_reverse_registration_order_and_their_size) {
  const distributed::Communicator world;
  manual_seed(1);
  TwoLayers model;  // first.weight 32, first.bias 8, unused 4 + 2, second.weight 24, second.bias 3 (float32)
  const distributed::GradientReducer one_bucket(world, model, 1, {.bucket_bytes = 1 << 20});
  BOOST_REQUIRE_EQUAL(one_bucket.num_buckets(), 1u);
  BOOST_CHECK(one_bucket.bucket_parameters()[0] == (std::vector<std::size_t>{5, 4, 3, 2, 1, 0}));
  // 30 floats (120 bytes) per bucket: second.bias, second.weight and unused.bias (29);
  // unused.weight and first.bias (12); first.weight (32, more than a bucket: alone).
  const distributed::GradientReducer small(world, model, 1, {.bucket_bytes = 120});
  const std::vector<std::vector<std::size_t>> expected = {{5, 4, 3}, {2, 1}, {0}};
  BOOST_CHECK(small.bucket_parameters() == expected);
  check_error([&] { distributed::GradientReducer(world, model, 0); }, {"GradientReducer", "micro-batch"});
}

BOOST_AUTO_TEST_CASE(accumulation_is_the_ordered_sum_of_the_micro_batches_over_their_count) {
  const distributed::Communicator world;
  manual_seed(2);
  TwoLayers model;
  Generator gen(3);
  const std::vector<Tensor> inputs = {Tensor::randn({5, 4}, gen), Tensor::randn({5, 4}, gen),
                                      Tensor::randn({5, 4}, gen)};
  // By hand: each micro-batch's gradients alone, then ((g0 + g1) + g2) / 3.
  std::vector<std::vector<Tensor>> each;
  for (const Tensor& x : inputs) {
    for (auto& [name, p] : model.named_parameters()) p.zero_grad();
    sum(model.forward(x)).backward();
    each.push_back(gradients_of(model));
  }
  distributed::GradientReducer reducer(world, model, 3, {.bucket_bytes = 64});
  for (const Tensor& x : inputs) {
    for (auto& [name, p] : model.named_parameters()) p.zero_grad();
    reducer.begin_micro_batch();
    sum(model.forward(x)).backward();
  }
  reducer.finish();
  const auto params = model.named_parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i].second;
    if (params[i].first.starts_with("unused")) {  // no gradient anywhere: zeros
      BOOST_CHECK(p.grad().to_vector() == std::vector<double>(p.numel(), 0.0));
      continue;
    }
    std::vector<float> expected(p.numel());
    const float* g0 = each[0][i].data<float>();
    const float* g1 = each[1][i].data<float>();
    const float* g2 = each[2][i].data<float>();
    for (std::size_t k = 0; k < expected.size(); ++k) expected[k] = ((g0[k] + g1[k]) + g2[k]) / 3.0f;
    BOOST_CHECK_MESSAGE(std::equal(expected.begin(), expected.end(), p.grad().data<float>()), params[i].first);
  }
  // The order of calls is checked.
  check_error([&] { reducer.finish(); }, {"finish", "after 0 of 3"});
  reducer.begin_micro_batch();
  check_error([&] { reducer.finish(); }, {"finish", "after 1 of 3"});
}
