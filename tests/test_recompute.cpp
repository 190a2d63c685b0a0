#define BOOST_TEST_MODULE recompute
// Activation recomputation: a recomputed block gives the gradients of the plain one, bit
// for bit (dropout, bf16 autocast, inputs with and without grad, 1 and 2 threads), its
// activations are not kept (a lower peak), gradcheck passes through it, and a function
// that cannot be recomputed is an Error naming what went wrong.
#include <cstring>
#include <utility>

#include "helpers.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/autograd/precision.hpp"
#include "xgrad/autograd/recompute.hpp"
#include "xgrad/nn/activation.hpp"
#include "xgrad/nn/linear.hpp"
#include "xgrad/nn/profiler.hpp"
#include "xgrad/nn/recompute.hpp"
#include "xgrad/nn/sequential.hpp"
#include "xgrad/nn/transformer.hpp"

using namespace xgrad;
using namespace xgrad::test;

using Inputs = std::vector<Tensor>;

namespace {

// Same shape, dtype and bytes.
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  return dispatch(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return std::memcmp(std::as_const(a).data<T>(), std::as_const(b).data<T>(), a.numel() * sizeof(T)) == 0;
  });
}

// What one training step leaves behind.
struct Step {
  std::vector<Tensor> grads;  // every parameter's, then the input's
  double loss = 0;
  std::uint64_t next_draw = 0;  // the default generator's next number after the step
  std::int64_t peak_bytes = 0;  // op outputs and gradients alive at once
};

void check_same_bits(const Step& recomputed, const Step& plain) {
  BOOST_CHECK_EQUAL(recomputed.loss, plain.loss);
  BOOST_CHECK_EQUAL(recomputed.next_draw, plain.next_draw);
  BOOST_REQUIRE_EQUAL(recomputed.grads.size(), plain.grads.size());
  for (std::size_t i = 0; i < plain.grads.size(); ++i)
    BOOST_CHECK_MESSAGE(same_bits(recomputed.grads[i], plain.grads[i]), "gradient " << i << " differs");
}

// Two micro-batches through `blocks` (gradients accumulate), each block recomputed or
// not; the input comes out of an op, as a block's input after an embedding does.
Step train_step(nn::Sequential& blocks, const Tensor& data, bool recomputed, bool input_requires_grad = true) {
  blocks.zero_grad();
  Tensor x = data.clone();
  x.requires_grad_(input_requires_grad);
  Generator target_values(5);
  const Tensor target = Tensor::randn(data.shape(), target_values, data.dtype());
  manual_seed(11);
  Profiler profiler;
  Step step;
  for (int micro_batch = 0; micro_batch < 2; ++micro_batch) {
    Tensor h = x * 1.5;
    for (std::size_t i = 0; i < blocks.size(); ++i) h = recomputed ? nn::recompute(blocks[i], h) : blocks[i].forward(h);
    const Tensor loss = sum(h * target);
    step.loss += loss.item();
    loss.backward();
  }
  profiler.stop();
  step.peak_bytes = profiler.peak_bytes();
  for (const Tensor& p : blocks.parameters()) step.grads.push_back(p.grad().clone());
  if (input_requires_grad) step.grads.push_back(x.grad().clone());
  step.next_draw = default_generator().next_u64();
  return step;
}

constexpr std::size_t kBlocks = 4, kBatch = 2, kLength = 8, kModel = 16, kHeads = 2, kHidden = 64;

std::shared_ptr<nn::Sequential> transformer_stack(DType dtype) {
  manual_seed(1);
  nn::TransformerEncoderLayerOptions options;
  options.d_model = kModel;
  options.nhead = kHeads;
  options.dim_feedforward = kHidden;
  options.dropout = 0.1;
  options.norm_first = true;
  auto blocks = std::make_shared<nn::Sequential>();
  for (std::size_t i = 0; i < kBlocks; ++i) blocks->push_back(std::make_shared<nn::TransformerEncoderLayer>(options));
  blocks->to(dtype);
  return blocks;
}

Tensor stack_input(DType dtype) {
  Generator gen(2);
  return Tensor::randn({kBatch, kLength, kModel}, gen, dtype);
}

// Restores the pool's thread count when it goes.
struct ThreadCount {
  explicit ThreadCount(int threads) { set_num_threads(threads); }
  ~ThreadCount() { set_num_threads(previous); }
  int previous = num_threads();
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_recomputed_function_has_the_plain_gradients) {
  const Tensor x = randn64({3, 4}, 1), w = randn64({4, 5}, 2), b = randn64({5}, 3);
  // w and b are captured, as a block's parameters are; x is an input.
  const auto block = [&](const Inputs& in) { return tanh(matmul(in[0], w) + b) * 3.0; };
  const Tensor seed = randn64({3, 5}, 4, false);

  block({x}).backward(seed);
  const Inputs plain{x.grad().clone(), w.grad().clone(), b.grad().clone()};
  for (Tensor t : {x, w, b}) t.zero_grad();
  std::vector<bool> recorded;  // per run: whether its ops kept a graph
  const Tensor y = recompute(
      [&](const Inputs& in) {
        const Tensor out = block(in);
        recorded.push_back(out.requires_grad());
        return out;
      },
      {x});
  BOOST_CHECK_EQUAL(std::string(y.op_name()), "recompute");
  BOOST_CHECK(recorded == std::vector<bool>{false});  // nothing kept for backward
  BOOST_CHECK(same_bits(y, block({x})));
  y.backward(seed);
  BOOST_CHECK((recorded == std::vector<bool>{false, true}));  // once more in backward, recording, and only once
  BOOST_CHECK(same_bits(x.grad(), plain[0]));
  BOOST_CHECK(same_bits(w.grad(), plain[1]));
  BOOST_CHECK(same_bits(b.grad(), plain[2]));
  check_gradients([&](const Inputs& in) { return recompute([&](const Inputs& r) { return r[0] * tanh(r[1]); }, in); },
                  {x, randn64({3, 4}, 5)});
}

BOOST_AUTO_TEST_CASE(an_input_without_grad_still_gives_the_parameters_theirs) {
  Tensor x = randn64({3, 4}, 1, /*requires_grad=*/false), w = randn64({4, 2}, 2);
  const auto block = [&](const Inputs& in) { return sigmoid(matmul(in[0], w)); };
  sum(block({x})).backward();
  const Tensor plain = w.grad().clone();
  w.zero_grad();
  const Tensor y = recompute(block, {x});
  BOOST_CHECK(y.requires_grad());
  sum(y).backward();
  BOOST_CHECK(same_bits(w.grad(), plain));
  BOOST_CHECK(!x.grad().defined());
  // Nothing requiring grad read: no graph, as without recompute.
  BOOST_CHECK(!recompute([](const Inputs& in) { return in[0] * 2.0; }, {x}).requires_grad());
}

BOOST_AUTO_TEST_CASE(under_no_grad_it_is_the_plain_forward) {
  const Tensor x = randn64({2, 3}, 1);
  int runs = 0;
  const NoGradGuard no_grad;
  const Tensor y = recompute(
      [&](const Inputs& in) {
        ++runs;
        return exp(in[0]);
      },
      {x});
  BOOST_CHECK_EQUAL(runs, 1);
  BOOST_CHECK(!y.requires_grad());
  BOOST_CHECK_EQUAL(std::string(y.op_name()), "");
  BOOST_CHECK(same_bits(y, exp(x)));
}

BOOST_AUTO_TEST_CASE(a_transformer_stack_has_the_same_gradient_bits_and_a_lower_peak) {
  for (const DType dtype : {DType::float32, DType::float64}) {
    for (const int threads : {1, 2}) {
      BOOST_TEST_CONTEXT(dtype_name(dtype) << ", " << threads << " threads") {
        const ThreadCount pool(threads);
        const auto stack = transformer_stack(dtype);
        nn::Sequential& blocks = *stack;
        const Tensor data = stack_input(dtype);
        const Step plain = train_step(blocks, data, false);
        const Step recomputed = train_step(blocks, data, true);
        check_same_bits(recomputed, plain);

        // Without recomputation, every block keeps its feed-forward hidden pair [B, L,
        // hidden] (linear1's output after ReLU, and that after dropout, which linear2
        // reads) until the backward reaches it; with it, one block's pair lives at a time.
        // So the peak drops by at least the other blocks' pairs.
        const auto pair_bytes =
            static_cast<std::int64_t>(2 * kBatch * kLength * kHidden * (dtype == DType::float32 ? 4 : 8));
        BOOST_TEST_MESSAGE("peak bytes: plain " << plain.peak_bytes << ", recomputed " << recomputed.peak_bytes);
        BOOST_CHECK_LE(recomputed.peak_bytes, plain.peak_bytes - static_cast<std::int64_t>(kBlocks - 1) * pair_bytes);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(an_input_without_grad_through_a_stack) {
  const auto stack = transformer_stack(DType::float32);
  nn::Sequential& blocks = *stack;
  const Tensor data = stack_input(DType::float32);
  check_same_bits(train_step(blocks, data, true, false), train_step(blocks, data, false, false));
}

BOOST_AUTO_TEST_CASE(a_block_under_bf16_autocast_is_recomputed_in_bf16) {
  const auto stack = transformer_stack(DType::float32);
  nn::Sequential& blocks = *stack;
  const Tensor data = stack_input(DType::float32);
  const auto step = [&](bool recomputed) {
    const AutocastGuard bf16(Precision::bfloat16);
    return train_step(blocks, data, recomputed);  // the backward inside too: the guard does not matter to it
  };
  const Step plain = step(false);
  check_same_bits(step(true), plain);
  // The check can fail: float32 products give other gradients.
  const Step float32 = train_step(blocks, data, true);
  BOOST_CHECK(!same_bits(float32.grads[0], plain.grads[0]));

  // The backward outside the guard: the second run still uses bf16 products.
  const Tensor x = data.clone().requires_grad_();
  Tensor y;
  {
    const AutocastGuard bf16(Precision::bfloat16);
    manual_seed(8);
    y = nn::recompute(blocks[0], x);
  }
  blocks.zero_grad();
  sum(y).backward();
  const Tensor recomputed = blocks[0].parameters()[0].grad().clone();
  blocks.zero_grad();
  {
    const AutocastGuard bf16(Precision::bfloat16);
    manual_seed(8);
    y = blocks[0].forward(x);
  }
  sum(y).backward();
  BOOST_CHECK(same_bits(recomputed, blocks[0].parameters()[0].grad()));
}

BOOST_AUTO_TEST_CASE(dropout_with_its_own_generator_draws_the_same_masks) {
  // One dropout draws from a generator of its own, the other from the default one.
  auto own = std::make_shared<Generator>(9);
  nn::Sequential block{std::make_shared<nn::Linear>(6, 6), std::make_shared<nn::Dropout>(0.5, own),
                       std::make_shared<nn::Linear>(6, 6), std::make_shared<nn::Dropout>(0.5)};
  Tensor x = randn64({4, 6}, 1, false).to(DType::float32).detach().requires_grad_();
  const auto step = [&](bool recomputed) {
    block.zero_grad();
    x.zero_grad();
    own->seed(9);
    manual_seed(3);
    sum(recomputed ? nn::recompute(block, x) : block.forward(x)).backward();
    std::vector<Tensor> grads{x.grad().clone()};
    for (const Tensor& p : block.parameters()) grads.push_back(p.grad().clone());
    return std::pair{grads, std::pair{own->next_u64(), default_generator().next_u64()}};
  };
  const auto plain = step(false), recomputed = step(true);
  BOOST_CHECK(recomputed.second == plain.second);  // both streams go on as without recompute
  for (std::size_t i = 0; i < plain.first.size(); ++i) BOOST_CHECK(same_bits(recomputed.first[i], plain.first[i]));
}

BOOST_AUTO_TEST_CASE(recomputation_nests) {
  Tensor x = randn64({3, 3}, 1), w = randn64({3, 3}, 2);
  const auto inner = [&](const Inputs& in) { return dropout(tanh(matmul(in[0], w)), 0.3, true, default_generator()); };
  const auto outer = [&](const Inputs& in) { return exp(recompute(inner, {in[0] * 0.5})) + in[0]; };
  const auto plain_outer = [&](const Inputs& in) { return exp(inner({in[0] * 0.5})) + in[0]; };
  manual_seed(4);
  sum(plain_outer({x})).backward();
  const Inputs plain{x.grad().clone(), w.grad().clone()};
  x.zero_grad();
  w.zero_grad();
  manual_seed(4);
  sum(recompute(outer, {x})).backward();
  BOOST_CHECK(same_bits(x.grad(), plain[0]));
  BOOST_CHECK(same_bits(w.grad(), plain[1]));
}

BOOST_AUTO_TEST_CASE(a_parameters_grad_ready_hook_sees_its_final_gradient_once) {
  Tensor x = randn64({2, 3}, 1), w = randn64({3, 3}, 2);
  std::vector<Tensor> seen;
  w.add_grad_ready_hook([&](const Tensor& leaf) { seen.push_back(leaf.grad().clone()); });
  // w is used inside the recomputed block and outside it.
  (sum(recompute([&](const Inputs& in) { return tanh(matmul(in[0], w)); }, {x})) + sum(w * 2.0)).backward();
  BOOST_REQUIRE_EQUAL(seen.size(), 1u);
  BOOST_CHECK(same_bits(seen[0], w.grad()));
}

BOOST_AUTO_TEST_CASE(gradcheck_of_a_recomputed_transformer_layer) {
  nn::TransformerEncoderLayerOptions options;
  options.d_model = 4;
  options.nhead = 2;
  options.dim_feedforward = 8;
  options.dropout = 0.2;
  options.norm_first = true;
  nn::TransformerEncoderLayer layer(options);
  check_module_gradients(layer,
                         [&](const Inputs& in) {
                           manual_seed(6);  // the same dropout masks for every evaluation
                           return nn::recompute(layer, in[0]);
                         },
                         {randn64({2, 3, 4}, 1)});
}

BOOST_AUTO_TEST_CASE(a_function_that_cannot_be_recomputed_is_an_error) {
  const Tensor x = randn64({2, 3}, 1), c = randn64({2, 3}, 2);
  check_error([&] { recompute(RecomputedFunction(), {x}); }, {"recompute", "function is empty"});
  check_error([&] { recompute([](const Inputs& in) { return in[0] * 2.0; }, {Tensor()}); },
              {"recompute", "input 0 is undefined"});
  check_error([&] { recompute([](const Inputs&) { return Tensor(); }, {x}); }, {"recompute", "undefined tensor"});
  check_error([&] { recompute([](const Inputs& in) { return in[0]; }, {x}); },
              {"recompute", "float64 [2, 3]", "none of its ops computed"});
  check_error(
      [&] {
        recompute(
            [&](const Inputs& in) {
              (void)exp(in[0]);
              return c;
            },
            {x});
      },
      {"recompute", "none of its ops computed"});
  check_error([&] { recompute([](const Inputs&) { return Tensor::ones({2}) * 3.0; }, {x}); },
              {"recompute", "float32 [2]", "depends on none of its 1 inputs"});
}

BOOST_AUTO_TEST_CASE(a_function_that_changes_between_runs_is_an_error) {
  Tensor x = randn64({2, 3}, 1), w = randn64({2, 3}, 2);
  int runs = 0;
  // The second run returns another shape.
  const Tensor shrinking = recompute([&](const Inputs& in) { return ++runs == 1 ? exp(in[0]) : sum(in[0], {0}); }, {x});
  check_error([&] { sum(shrinking).backward(); },
              {"recompute", "float64 [2, 3] in the forward pass but float64 [3]", "the same thing each time"});
  // The second run reads a tensor requiring grad that the first did not.
  runs = 0;
  const Tensor widening = recompute([&](const Inputs& in) { return ++runs == 1 ? exp(in[0]) : in[0] * w; }, {x});
  check_error([&] { sum(widening).backward(); }, {"recompute", "other tensors that require grad"});
  // The second run draws random numbers from another generator.
  runs = 0;
  Generator other(1);
  const Tensor drawing = recompute(
      [&](const Inputs& in) { return dropout(in[0], 0.5, true, ++runs == 1 ? default_generator() : other); }, {x});
  check_error([&] { sum(drawing).backward(); }, {"recompute", "other random generators"});
  // Nothing was left half done: a plain backward through x still works.
  x.zero_grad();
  sum(x * 2.0).backward();
  BOOST_CHECK(same_bits(x.grad(), Tensor::full({2, 3}, 2.0, DType::float64)));
}
