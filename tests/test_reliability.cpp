#define BOOST_TEST_MODULE reliability
// Classes of input that once crashed, lost data or gave silent nonsense through the
// public API, each tried with several members of the class (issue 14).
#include "helpers.hpp"

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "xgrad/autograd/parallel.hpp"
#include "xgrad/nn/nn.hpp"
#include "xgrad/optim/optim.hpp"

using namespace xgrad;
using namespace xgrad::test;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

bool is_nan(double v) { return std::isnan(v); }

std::string float_bytes(std::initializer_list<float> values) {
  std::string out(values.size() * 4, '\0');
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

class Chain : public nn::Module {
 public:
  std::shared_ptr<nn::Module> add(const std::string& name, std::shared_ptr<nn::Module> m) {
    return register_module(name, std::move(m));
  }
};

}  // namespace

// ---- data loss: empty tensors in checkpoints -------------------------------------

BOOST_AUTO_TEST_CASE(checkpoints_with_empty_tensors_read_back) {
  for (std::size_t out : {0, 1, 3}) {
    manual_seed(1);
    nn::Sequential model;
    model.push_back(std::make_shared<nn::Linear>(4, 3));
    model.push_back(std::make_shared<nn::Linear>(3, out));  // out = 0: weight [0, 3], bias [0]
    model.push_back(std::make_shared<nn::Linear>(0, 2));    // weight [2, 0]
    const StateDict before = model.state_dict();
    const nn::SafetensorsContents back = nn::decode_safetensors(nn::encode_safetensors(before));
    BOOST_REQUIRE_EQUAL(back.tensors.size(), before.size());
    for (const auto& [name, t] : before) {
      BOOST_TEST_CONTEXT(name) {
        BOOST_CHECK(back.tensors.at(name).shape() == t.shape());
        BOOST_CHECK(back.tensors.at(name).to_vector() == t.to_vector());
      }
    }
    nn::Sequential copy;
    copy.push_back(std::make_shared<nn::Linear>(4, 3));
    copy.push_back(std::make_shared<nn::Linear>(3, out));
    copy.push_back(std::make_shared<nn::Linear>(0, 2));
    copy.load_state_dict(back.tensors);
  }
}

BOOST_AUTO_TEST_CASE(empty_tensors_anywhere_in_a_foreign_header) {
  // Other writers (numpy, safetensors) place zero-size tensors at any offset and list
  // entries in any order: every order of these headers describes the same file.
  const std::string data = float_bytes({1, 2, 3});
  const std::vector<std::string> headers = {
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"e":{"dtype":"F32","shape":[0],"data_offsets":[8,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
      R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},"e":{"dtype":"F32","shape":[0,4],"data_offsets":[8,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
      R"({"e":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"f":{"dtype":"F64","shape":[3,0],"data_offsets":[0,0]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},"e":{"dtype":"F32","shape":[0],"data_offsets":[12,12]}})",
  };
  for (const std::string& header : headers) {
    BOOST_TEST_CONTEXT(header) {
      const nn::SafetensorsContents c = nn::decode_safetensors(safetensors_bytes(header, data));
      BOOST_CHECK(c.tensors.at("a").to_vector() == (std::vector<double>{1, 2}));
      BOOST_CHECK(c.tensors.at("b").to_vector() == (std::vector<double>{3}));
      BOOST_CHECK_EQUAL(c.tensors.at("e").numel(), 0u);
    }
  }
  // Still refused: a real overlap, and an empty tensor inside another one's bytes.
  check_error(
      [&] {
        nn::decode_safetensors(safetensors_bytes(
            R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
            data));
      },
      {"overlaps"});
  check_error(
      [&] {
        nn::decode_safetensors(safetensors_bytes(
            R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})",
            data));
      },
      {"'e'", "starts at byte 4"});
}

// ---- crashes through the public API ----------------------------------------------

BOOST_AUTO_TEST_CASE(indices_whose_fields_disagree_are_refused_by_every_op) {
  const Tensor weight = Tensor::zeros({5, 3});
  const Tensor logits = Tensor::zeros({2, 4});
  std::vector<Indices> broken(3, Indices({0, 1}, {2}));
  broken[0].values.push_back(1);  // more values than the shape holds
  broken[1].shape = {2, 7};       // a shape larger than the values
  broken[2].values.clear();       // no values at all
  for (const Indices& ids : broken) {
    check_error([&] { embedding(weight, ids); }, {"embedding", "values but their shape"});
    check_error([&] { cross_entropy(logits, ids); }, {"cross_entropy", "values but their shape"});
  }
  nn::Embedding layer(5, 3);
  check_error([&] { layer.forward(broken[1]); }, {"embedding"});
}

BOOST_AUTO_TEST_CASE(optimizer_state_must_match_its_parameter) {
  const auto step_after_change = [](auto make, const Tensor& replacement) {
    Tensor w = Tensor::ones({2, 3}).requires_grad_();
    auto opt = make(optim::NamedParameters{{"w", w}});
    sum(w * w).backward();
    opt->step();  // makes the state at [2, 3]
    w.set_data(replacement);
    sum(w * w).backward();
    check_error([&] { opt->step(); }, {"'w'", "state"});
  };
  const auto sgd = [](optim::NamedParameters p) {
    return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  };
  const auto adam = [](optim::NamedParameters p) { return std::make_unique<optim::Adam>(std::move(p)); };
  const auto adamw = [](optim::NamedParameters p) { return std::make_unique<optim::AdamW>(std::move(p)); };
  for (const Tensor& replacement :
       {Tensor::ones({4, 5}), Tensor::ones({6}), Tensor::ones({2, 3}, DType::float64), Tensor::ones({0})}) {
    step_after_change(sgd, replacement);
    step_after_change(adam, replacement);
    step_after_change(adamw, replacement);
  }
  // A whole module converted after the optimizer was made.
  nn::Linear layer(3, 2);
  optim::Adam opt(layer.named_parameters());
  sum(layer(Tensor::ones({1, 3}))).backward();
  opt.step();
  layer.to(DType::float64);
  sum(layer(Tensor::ones({1, 3}, DType::float64))).backward();
  check_error([&] { opt.step(); }, {"Adam", "float64", "float32"});
}

BOOST_AUTO_TEST_CASE(one_tensor_given_twice_to_an_optimizer_is_refused) {
  Tensor w = Tensor::ones({2}).requires_grad_();
  check_error([&] { optim::SGD({{"a", w}, {"b", w}}, {.lr = 0.1}); }, {"SGD", "'a'", "'b'", "same tensor"});
  check_error([&] { optim::Adam({{"a", w}, {"b", w.detach().requires_grad_()}, {"c", w}}); }, {"'a'", "'c'"});
}

BOOST_AUTO_TEST_CASE(hyperparameters_must_be_finite) {
  Tensor w = Tensor::ones({2}).requires_grad_();
  const optim::NamedParameters p{{"w", w}};
  for (double bad : {kNaN, kInf, -kInf}) {
    BOOST_TEST_CONTEXT(bad) {
      check_error([&] { optim::SGD(p, {.lr = bad}); }, {"SGD", "learning rate"});
      check_error([&] { optim::SGD(p, {.lr = 0.1, .momentum = bad}); }, {"SGD", "momentum"});
      check_error([&] { optim::SGD(p, {.lr = 0.1, .dampening = bad}); }, {"SGD", "dampening"});
      check_error([&] { optim::SGD(p, {.lr = 0.1, .weight_decay = bad}); }, {"SGD", "weight_decay"});
      check_error([&] { optim::Adam(p, {.eps = bad}); }, {"Adam", "eps"});
      check_error([&] { optim::AdamW(p, {.weight_decay = bad}); }, {"AdamW", "weight_decay"});
      check_error([&] { optim::Adam(p, {.beta1 = bad}); }, {"Adam", "beta1"});
      optim::SGD sgd(p, {.lr = 0.1});
      check_error([&] { optim::StepLR(sgd, 10, bad); }, {"StepLR", "gamma"});
      check_error([&] { optim::NoamLR(sgd, 16, 10, bad); }, {"NoamLR", "factor"});
      check_error([&] { optim::WarmupCosineLR(sgd, 1, 10, bad); }, {"WarmupCosineLR", "min_lr"});
      check_error([&] { nn::LayerNorm(4, bad); }, {"LayerNorm", "eps"});
      check_error([&] { layer_norm(Tensor::ones({2, 4}), Tensor(), Tensor(), bad); }, {"layer_norm", "eps"});
    }
  }
  // A signed size: -16 would otherwise wrap to 2^64 - 16 and give a tiny, plausible rate.
  optim::SGD sgd(p, {.lr = 0.1});
  check_error([&] { optim::NoamLR(sgd, -16, 10); }, {"NoamLR", "d_model -16"});
  check_error([&] { optim::NoamLR(sgd, 16, 0); }, {"NoamLR", "warmup 0"});
  // Positive in double, zero in float32: a constant row would divide by zero.
  check_error([&] { layer_norm(Tensor::ones({2, 4}), Tensor(), Tensor(), 1e-50); }, {"layer_norm", "rounds to 0"});
  nn::LayerNorm tiny_eps(4, 1e-50);
  check_error([&] { tiny_eps(Tensor::ones({2, 4})); }, {"layer_norm", "float32"});
  BOOST_CHECK_NO_THROW(tiny_eps.to(DType::float64)(Tensor::ones({2, 4}, DType::float64)));
}

BOOST_AUTO_TEST_CASE(optimizer_checkpoint_state_is_checked_before_it_is_trusted) {
  Tensor w = Tensor::ones({3}).requires_grad_();
  optim::Adam adam({{"w", w}});
  sum(w * w).backward();
  adam.step();
  const StateDict good = adam.state_dict();
  const auto with = [&](const std::string& key, const Tensor& value) {
    StateDict s = good;
    s[key] = value;
    return s;
  };
  const std::vector<std::pair<StateDict, std::string>> damaged = {
      {with("step", Tensor::scalar(kNaN, DType::float64)), "step"},
      {with("step", Tensor::scalar(1e300, DType::float64)), "step"},
      {with("step", Tensor::scalar(2.5, DType::float64)), "step"},
      {with("step", Tensor::scalar(-1, DType::float64)), "step"},
      {with("state.w.step", Tensor::scalar(kInf, DType::float64)), "state.w.step"},
      {with("state.w.step", Tensor::scalar(0, DType::float64)), "state.w.step"},
      {with("state.w.exp_avg", Tensor::from_vector({1, kNaN, 2}, {3})), "NaN or Inf"},
      {with("state.w.exp_avg_sq", Tensor::from_vector({1, kInf, 2}, {3})), "NaN or Inf"},
      // Finite in float64, Inf once held in the parameter's float32.
      {with("state.w.exp_avg", Tensor::from_vector({1, 1e300, 2}, {3}, DType::float64)),
       "state.w.exp_avg overflows float32"},
      // The square root of a negative second moment is NaN: the next step would poison w.
      {with("state.w.exp_avg_sq", Tensor::from_vector({1, 0, -1e-30}, {3})),
       "state.w.exp_avg_sq holds -1e-30 at element 2"},
      {with("group.0.lr", Tensor::scalar(kNaN, DType::float64)), "group 0: learning rate"},
      {with("group.0.eps", Tensor::scalar(-1, DType::float64)), "group 0: eps"},
  };
  for (const auto& [state, what] : damaged) {
    BOOST_TEST_CONTEXT(what) {
      check_error([&] { adam.load_state_dict(state); }, {"Adam", what});
      BOOST_CHECK_EQUAL(adam.step_count(), 1);  // unchanged
      BOOST_CHECK_EQUAL(adam.lr(), 1e-3);
    }
  }
}

BOOST_AUTO_TEST_CASE(an_optimizer_of_no_parameter_is_an_error) {
  // As PyTorch's "optimizer got an empty parameter list": it would step without a word.
  check_error([] { optim::Adam(optim::NamedParameters{}); }, {"Adam", "empty parameter list", "1 group"});
  check_error(
      [] {
        optim::SGD(std::vector<optim::ParamGroup>{{}, {}}, {});
      },
      {"SGD", "empty parameter list", "2 groups"});
  nn::Linear frozen(2, 2);
  for (auto& [name, p] : frozen.named_parameters()) p.requires_grad_(false);
  check_error([&] { optim::AdamW(nn::trainable_parameters(frozen)); }, {"AdamW", "empty parameter list"});
}

BOOST_AUTO_TEST_CASE(shapes_beyond_64_bits_or_memory_are_errors) {
  const std::size_t big = std::size_t{1} << 32;
  check_error([&] { Tensor::zeros({big, big}); }, {"shape", "2^64"});
  check_error([&] { Tensor::ones({big, big, 2}); }, {"shape", "2^64"});
  check_error([&] { Tensor::zeros({std::size_t{1} << 62, 8}); }, {"2^64"});  // the count fits, the bytes do not
  check_error([&] { nn::Linear(big, big); }, {"2^64"});
  Generator gen(0);
  check_error([&] { Tensor::randn({std::size_t{1} << 42}, gen); }, {"Tensor::randn", "cannot allocate", "MiB"});
  check_error([&] { Tensor::full({std::size_t{1} << 41, 4}, 1.0); }, {"Tensor::full", "cannot allocate"});
  check_error(
      [&] {
        reshape(Tensor::zeros({4}), {static_cast<std::int64_t>(big), static_cast<std::int64_t>(big), -1});
      },
      {"2^64"});
  // A zero anywhere makes the product 0, however large the other axes.
  BOOST_CHECK_EQUAL(Tensor::zeros({big, 0, big}).numel(), 0u);
}

BOOST_AUTO_TEST_CASE(generator_below_zero_is_an_error) {
  Generator gen(3);
  check_error([&] { gen.below(0); }, {"Generator::below"});
  for (std::uint64_t n : {1ull, 2ull, 7ull, ~0ull}) BOOST_CHECK_LT(gen.below(n), n);
}

BOOST_AUTO_TEST_CASE(modules_nested_to_any_depth) {
  for (std::size_t depth : {1000u, 100000u}) {
    BOOST_TEST_CONTEXT(depth) {
      auto root = std::make_shared<nn::Sequential>();
      std::shared_ptr<nn::Sequential> tip = root;
      for (std::size_t i = 0; i < depth; ++i) {
        auto next = std::make_shared<nn::Sequential>();
        tip->push_back(next);
        tip = next;
      }
      tip->push_back(std::make_shared<nn::Linear>(2, 2));
      const auto params = root->named_parameters();
      BOOST_REQUIRE_EQUAL(params.size(), 2u);
      BOOST_CHECK_EQUAL(params[0].first.size(), 2 * depth + std::string("0.weight").size());
      BOOST_CHECK_EQUAL(root->state_dict().size(), 2u);
      root->eval();
      BOOST_CHECK(!tip->is_training());
      root->to(DType::float64);
      BOOST_CHECK(params[0].second.dtype() == DType::float64);
      BOOST_CHECK_EQUAL(root->num_parameters(), 6u);
      if (depth <= 1000) BOOST_CHECK(root->to_string().find("# 6 parameters") != std::string::npos);
      tip.reset();
      root.reset();  // destroying the chain must not recurse either
    }
  }
}

BOOST_AUTO_TEST_CASE(a_module_inside_itself_is_an_error_not_a_hang) {
  // The link back owns nothing (a shared_ptr cycle would leak): outer lives on the stack.
  Chain outer_object;
  const std::shared_ptr<Chain> outer(&outer_object, [](Chain*) {});
  auto inner = std::make_shared<Chain>();
  outer->add("inner", inner);
  inner->add("back", outer);  // a cycle: outer -> inner -> outer
  check_error([&] { outer->named_parameters(); }, {"contains itself", "inner.back"});
  check_error([&] { outer->to_string(); }, {"contains itself"});
  check_error([&] { outer->train(); }, {"contains itself"});
  // The same module twice (shared, not a cycle) is fine.
  auto shared = std::make_shared<nn::Linear>(2, 2);
  Chain twice;
  twice.add("a", shared);
  twice.add("b", shared);
  BOOST_CHECK_EQUAL(twice.named_parameters().size(), 4u);
}

// ---- silent wrong results: NaN and Inf propagate --------------------------------

BOOST_AUTO_TEST_CASE(nan_propagates_through_reductions_and_activations) {
  const Tensor x = Tensor::from_vector({1, kNaN, 3}, {3});
  BOOST_CHECK(is_nan(max(x).item()));
  BOOST_CHECK(is_nan(max(Tensor::from_vector({kNaN, 1, 3}, {3})).item()));
  BOOST_CHECK(is_nan(max(Tensor::from_vector({1, 3, kNaN}, {3})).item()));
  const std::vector<double> per_row = max(Tensor::from_vector({1, kNaN, 5, 2}, {2, 2}), {1}).to_vector();
  BOOST_CHECK(is_nan(per_row[0]));
  BOOST_CHECK_EQUAL(per_row[1], 5);
  BOOST_CHECK(is_nan(relu(x).to_vector()[1]));
  BOOST_CHECK_EQUAL(relu(x).to_vector()[2], 3);
  BOOST_CHECK(is_nan(sigmoid(x).to_vector()[1]));
  BOOST_CHECK(is_nan(gelu(x).to_vector()[1]));
  for (double v : softmax(x, 0).to_vector()) BOOST_CHECK(is_nan(v));
  for (double v : log_softmax(x, 0).to_vector()) BOOST_CHECK(is_nan(v));
  // A row of -inf (fully masked) still gives zeros, not NaN.
  for (double v : softmax(Tensor::from_vector({-kInf, -kInf}, {2}), 0).to_vector()) BOOST_CHECK_EQUAL(v, 0);
  const Indices target({0}, {1});
  BOOST_CHECK(is_nan(cross_entropy(Tensor::from_vector({0, kNaN, 1}, {1, 3}), target).item()));
}

BOOST_AUTO_TEST_CASE(nan_in_attention_reaches_the_output) {
  Generator gen(5);
  const Tensor q = Tensor::randn({1, 4, 8}, gen, DType::float64);
  const Tensor v = Tensor::randn({1, 6, 8}, gen, DType::float64);
  std::vector<double> kv = Tensor::randn({1, 6, 8}, gen, DType::float64).to_vector();
  kv[2 * 8 + 3] = kNaN;  // key 2 holds a NaN
  const Tensor k = Tensor::from_vector(kv, {1, 6, 8}, DType::float64);
  for (double o : scaled_dot_product_attention(q, k, v).output.to_vector()) BOOST_CHECK(is_nan(o));
  // Masked away, the NaN key is never looked at.
  AttentionOptions hide_key2;
  std::vector<double> keep(6, 1.0);
  keep[2] = 0;
  hide_key2.mask = Tensor::from_vector(keep, {1, 6});
  for (double o : scaled_dot_product_attention(q, k, v, hide_key2).output.to_vector()) BOOST_CHECK(!is_nan(o));
  // A NaN scale is a setting, not data: refused, naming it (test_bad_input). A NaN in an
  // additive mask is data: NaN rows, not zeros.
  AttentionOptions nan_bias;
  std::vector<double> bias(4 * 6, 0.0);
  bias[1 * 6 + 4] = kNaN;  // query 1, key 4
  nan_bias.additive_mask = Tensor::from_vector(bias, {4, 6}, DType::float64);
  const std::vector<double> out = scaled_dot_product_attention(q, v, v, nan_bias).output.to_vector();
  for (std::size_t i = 0; i < out.size(); ++i) BOOST_CHECK_EQUAL(is_nan(out[i]), i / 8 == 1);
  // Fully masked rows of finite inputs: zeros, never NaN.
  AttentionOptions none;
  none.mask = Tensor::zeros({4, 6});
  for (double o : scaled_dot_product_attention(q, v, v, none).output.to_vector()) BOOST_CHECK_EQUAL(o, 0);
  // Anomaly mode names the attention op.
  AnomalyModeGuard anomaly;
  check_error([&] { scaled_dot_product_attention(q, k, v); }, {"anomaly", "attention"});
}

// ---- concurrent backward through shared parameters --------------------------------

BOOST_AUTO_TEST_CASE(concurrent_backward_through_a_shared_parameter_is_an_error_never_a_lost_gradient) {
  nn::Linear shared(64, 64);
  const Tensor x = Tensor::ones({256, 64});
  int collisions = 0;
  for (int round = 0; round < 40; ++round) {
    shared.zero_grad();
    std::atomic<int> ready{0}, errors{0};
    const auto worker = [&] {
      const Tensor loss = sum(shared(x));
      ready.fetch_add(1);
      while (ready.load() < 2) std::this_thread::yield();
      try {
        loss.backward();
      } catch (const Error& e) {
        BOOST_CHECK(std::string(e.what()).find("another backward pass") != std::string::npos);
        errors.fetch_add(1);
      }
    };
    std::thread a(worker), b(worker);
    a.join();
    b.join();
    collisions += errors.load() > 0;
    // Each pass that ran added exactly its own contribution: d(sum)/d(bias) = 256 per pass.
    const double passes = 2 - errors.load();
    for (double g : shared.bias.grad().to_vector()) BOOST_CHECK_EQUAL(g, 256.0 * passes);
  }
  BOOST_TEST_MESSAGE("rounds that collided: " << collisions);
}

// ---- unclear errors ------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(text_json_cannot_hold_is_named_not_thrown_through) {
  const StateDict one = {{"w", Tensor::zeros({1})}};
  for (const std::string& bad : {std::string("bad\xff"), std::string("\xc3"), std::string("a\xed\xa0\x80z")}) {
    check_error([&] { nn::encode_safetensors({{bad, Tensor::zeros({1})}}); }, {"save", "tensor name", "UTF-8"});
    check_error([&] { nn::encode_safetensors(one, {{"note", bad}}); }, {"save", "metadata value", "UTF-8"});
    check_error([&] { nn::encode_safetensors(one, {{bad, "x"}}); }, {"save", "metadata key", "UTF-8"});
  }
}

BOOST_AUTO_TEST_CASE(duplicate_header_keys_are_refused) {
  const std::string data = float_bytes({1, 2});
  const std::string entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  check_error([&] { nn::decode_safetensors(safetensors_bytes("{" + entry + "," + entry + "}", data)); },
              {"'a'", "twice"});
  check_error(
      [&] { nn::decode_safetensors(safetensors_bytes("{" + entry + R"(,"__metadata__":{"k":"1","k":"2"}})", data)); },
      {"'k'", "twice"});
  check_error(
      [&] {
        nn::decode_safetensors(
            safetensors_bytes(R"({"a":{"dtype":"F32","dtype":"F64","shape":[2],"data_offsets":[0,8]}})", data));
      },
      {"'dtype'", "twice"});
}

BOOST_AUTO_TEST_CASE(errors_about_many_names_stay_short) {
  // load_state_dict of `stray` unexpected entries: one short line, "and N more".
  const auto short_error = [](Stateful& target, StateDict state, int stray) {
    for (int i = 0; i < stray; ++i) state.emplace(str("stray.", i), Tensor::zeros({1}));
    check_error([&] { target.load_state_dict(state); }, {str("and ", stray - 10, " more")});
    try {
      target.load_state_dict(state);
    } catch (const Error& e) {
      BOOST_CHECK_LT(std::string(e.what()).size(), 1000u);
    }
  };
  nn::Linear layer(2, 2);
  short_error(layer, layer.state_dict(), 100000);
  Tensor w = Tensor::ones({1}).requires_grad_();
  optim::SGD sgd({{"w", w}}, {.lr = 0.1});
  short_error(sgd, sgd.state_dict(), 5000);
}

BOOST_AUTO_TEST_CASE(thread_counts_are_bounded) {
  check_error([] { set_num_threads(max_threads() + 1); }, {"set_num_threads", "at most"});
  check_error([] { set_num_threads(1 << 20); }, {"set_num_threads"});
  BOOST_CHECK_GE(max_threads(), 8);
}
