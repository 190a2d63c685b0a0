#define BOOST_TEST_MODULE custom_optimizer
// An optimizer written outside optim/, as a user would write one: Lion (Chen et al.
// 2023, "Symbolic Discovery of Optimization Algorithms"), with settings a group may
// override. It trains, checkpoints and resumes exactly like the built-in optimizers.
#include "helpers.hpp"

#include <unistd.h>
#include <filesystem>

#include "xgrad/nn/checkpoint.hpp"
#include "xgrad/nn/nn.hpp"
#include "xgrad/optim/optim.hpp"

using namespace xgrad;
using namespace xgrad::test;
namespace fs = std::filesystem;

namespace {

struct LionOptions {
  double lr = 1e-4;
  double beta1 = 0.9, beta2 = 0.99;
  double weight_decay = 0.0;
};

// Lion's settings: its names in groups, state dicts and errors, and the values each takes.
constexpr optim::Setting<LionOptions> kLionSettings[] = {{"lr", &LionOptions::lr, {.min = 0}},
                                                         {"beta1", &LionOptions::beta1, {.min = 0, .max = 1}},
                                                         {"beta2", &LionOptions::beta2, {.min = 0, .max = 1}},
                                                         {"weight_decay", &LionOptions::weight_decay, {.min = 0}}};

// Per element, from the gradient g and the momentum m:
//   c = beta1 m + (1 - beta1) g;  p -= lr (sign(c) + weight_decay p);  m = beta2 m + (1 - beta2) g
class Lion : public optim::OptimizerWith<LionOptions> {
 public:
  Lion(std::vector<optim::ParamGroup> groups, const LionOptions& options = {})
      : OptimizerWith("Lion", groups, options, kLionSettings) {}

 protected:
  void update(std::size_t i, const Tensor& grad, std::int64_t) override {
    Tensor param = parameters()[i].second;
    const LionOptions& o = group_options(group_of(i));
    Tensor& momentum = buffer(i, "exp_avg");
    dispatch(param.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* p = param.data<T>();
      T* m = momentum.data<T>();
      const T* g = grad.data<T>();
      for (std::size_t k = 0; k < param.numel(); ++k) {
        const T c = T(o.beta1) * m[k] + T(1 - o.beta1) * g[k];
        p[k] -= T(o.lr) * (T((c > 0) - (c < 0)) + T(o.weight_decay) * p[k]);
        m[k] = T(o.beta2) * m[k] + T(1 - o.beta2) * g[k];
      }
    });
  }
  std::vector<std::string> buffer_names(const LionOptions&) const override { return {"exp_avg"}; }
};

// A regression: a two-layer network fits y = sin(x0) - x1 x2 on 64 fixed points.
struct Problem {
  nn::Sequential model;
  Tensor x, y;

  explicit Problem(std::uint64_t seed) {
    manual_seed(seed);  // the layers' initial weights
    model.push_back(std::make_shared<nn::Linear>(3, 16));
    model.push_back(std::make_shared<nn::ReLU>());
    model.push_back(std::make_shared<nn::Linear>(16, 1));
    Generator gen(100);
    x = Tensor::randn({64, 3}, gen);
    y = reshape(sin(slice(x, 1, 0, 1)) - slice(x, 1, 1, 2) * slice(x, 1, 2, 3), {64, 1});
  }
  Tensor loss() { return mean(pow(model(x) - y, 2.0)); }
  // The body (the first layer) takes the options; the head has its own beta2 and rate.
  std::vector<optim::ParamGroup> groups(const optim::SettingValues& head_settings = {{"beta2", 0.9}, {"lr", 0.02}}) {
    optim::ParamGroup body, head{{}, head_settings};
    for (const auto& named : model.named_parameters())
      (named.first.starts_with("0.") ? body : head).parameters.push_back(named);
    return {body, head};
  }
};

std::vector<double> train(Problem& p, optim::Optimizer& opt, int steps) {
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    Tensor loss = p.loss();
    loss.backward();
    opt.step();
    losses.push_back(loss.item());
  }
  return losses;
}

// Every tensor of two state dicts (a model's, an optimizer's) the same, bit for bit.
void check_identical(const StateDict& a, const StateDict& b) {
  BOOST_REQUIRE_EQUAL(a.size(), b.size());
  for (const auto& [key, tensor] : a) {
    BOOST_REQUIRE_MESSAGE(b.count(key), key << " is missing");
    BOOST_CHECK_MESSAGE(tensor.to_vector() == b.at(key).to_vector(), key << " differs");
  }
}

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("xgrad-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

constexpr LionOptions kOptions{.lr = 0.01, .weight_decay = 0.01};

}  // namespace

BOOST_AUTO_TEST_CASE(a_lion_written_outside_optim_trains_checkpoints_and_resumes_bitwise) {
  // Uninterrupted: 60 steps.
  Problem whole(1);
  Lion whole_lion(whole.groups(), kOptions);
  const std::vector<double> losses = train(whole, whole_lion, 60);
  BOOST_CHECK_MESSAGE(losses.back() < 0.1 * losses.front(), "loss " << losses.front() << " -> " << losses.back());

  // Interrupted after 25 steps: saved with nn::save, loaded into a model initialised
  // otherwise and a Lion made with default settings, whose groups take the state's.
  Problem first(1);
  Lion first_lion(first.groups(), kOptions);
  train(first, first_lion, 25);
  const fs::path path = scratch("lion.safetensors");
  nn::save(path, first.model, &first_lion, {{"step", "25"}});
  const StateDict saved = first_lion.state_dict();
  BOOST_CHECK_EQUAL(saved.at("group.1.beta2").item(), 0.9);  // the head's own
  BOOST_CHECK_EQUAL(saved.at("group.0.beta2").item(), 0.99);
  BOOST_CHECK_EQUAL(saved.at("group.1.lr").item(), 0.02);
  BOOST_CHECK(saved.count("state.2.weight.exp_avg") && saved.at("state.2.weight.step").item() == 25.0);

  Problem resumed(2);
  Lion resumed_lion(resumed.groups({}));
  BOOST_REQUIRE(resumed.model.state_dict().at("0.weight").to_vector() !=
                first.model.state_dict().at("0.weight").to_vector());
  BOOST_CHECK_EQUAL(nn::load(path, resumed.model, &resumed_lion).at("step"), "25");
  BOOST_CHECK_EQUAL(resumed_lion.group_setting(1, "beta2"), 0.9);
  BOOST_CHECK_EQUAL(resumed_lion.group_options(0).weight_decay, 0.01);
  BOOST_CHECK_EQUAL(resumed_lion.step_count(), 25);
  const std::vector<double> rest = train(resumed, resumed_lion, 35);

  BOOST_CHECK(rest == std::vector<double>(losses.begin() + 25, losses.end()));
  check_identical(resumed.model.state_dict(), whole.model.state_dict());
  check_identical(resumed_lion.state_dict(), whole_lion.state_dict());
  fs::remove_all(path.parent_path());
}

// An optimizer written elsewhere reads its gradients itself: step(factor) scales each in
// place first, so that it too updates as clip_grad_norm then step() do, bit for bit.
BOOST_AUTO_TEST_CASE(a_clip_factor_reaches_an_optimizer_written_elsewhere) {
  Problem clipped(5), folded(5);
  Lion clipped_lion(clipped.groups()), folded_lion(folded.groups());
  for (int step = 0; step < 4; ++step) {
    for (Problem* p : {&clipped, &folded}) {
      p->model.zero_grad();
      p->loss().backward();
    }
    optim::clip_grad_norm(clipped.model.parameters(), 0.01);
    clipped_lion.step();
    const optim::GradNormClip clip = optim::grad_norm_clip(folded.model.parameters(), 0.01);
    BOOST_TEST(clip.factor < 1.0);
    folded_lion.step(clip.factor);
    check_identical(folded.model.state_dict(), clipped.model.state_dict());
    check_identical(folded_lion.state_dict(), clipped_lion.state_dict());
  }
}

BOOST_AUTO_TEST_CASE(a_group_setting_reaches_the_update) {
  // Under the two-group Lion, each group trains bit for bit as under a Lion of its own
  // made with the group's settings; with the options alone (no override), the head
  // trains otherwise.
  Problem grouped(1), apart(1), plain(1);
  Lion lion(grouped.groups(), kOptions);
  const std::vector<optim::ParamGroup> parts = apart.groups();
  LionOptions head_options = kOptions;
  head_options.beta2 = 0.9, head_options.lr = 0.02;
  Lion body_lion({{parts[0].parameters}}, kOptions), head_lion({{parts[1].parameters}}, head_options);
  Lion plain_lion(plain.groups({}), kOptions);
  for (int s = 0; s < 10; ++s) {
    train(grouped, lion, 1);
    body_lion.zero_grad(), head_lion.zero_grad();
    apart.loss().backward();
    body_lion.step(), head_lion.step();
    train(plain, plain_lion, 1);
  }
  check_identical(grouped.model.state_dict(), apart.model.state_dict());
  BOOST_CHECK(grouped.model.state_dict().at("2.weight").to_vector() !=
              plain.model.state_dict().at("2.weight").to_vector());
}

BOOST_AUTO_TEST_CASE(wrong_group_settings_are_refused_by_name) {
  Problem p(1);
  // A name Lion does not have, in a group: the error lists those it has.
  check_error(
      [&] {
        Lion(p.groups({{"momentum", 0.9}}));
      },
      {"Lion: group 1 sets momentum, which Lion does not have (it has lr, beta1, beta2, weight_decay)"});
  check_error([&] { Lion(p.groups({{"beta2", 1.5}})); }, {"Lion: group 1: beta2 1.5 must lie in [0, 1]"});
  check_error([&] { Lion(p.groups(), {.lr = -1.0}); }, {"Lion: learning rate -1.0 must be finite and >= 0"});

  // A state whose group 1 has a beta2 out of range: refused, naming the group, and the
  // optimizer is left as it was; the same through a checkpoint file.
  Lion lion(p.groups(), kOptions);
  train(p, lion, 3);
  StateDict bad = lion.state_dict();
  bad["group.1.beta2"] = Tensor::scalar(1.5, DType::float64);
  check_error([&] { lion.load_state_dict(bad); }, {"Lion: load_state_dict: group 1: beta2 1.5 must lie in [0, 1]"});
  BOOST_CHECK_EQUAL(lion.group_setting(1, "beta2"), 0.9);
  StateDict file = p.model.state_dict();
  for (const auto& [key, tensor] : bad) file["optimizer." + key] = tensor;
  const fs::path path = scratch("bad_lion.safetensors");
  nn::write_safetensors(path, file);
  check_error([&] { nn::load(path, p.model, &lion); }, {path.string(), "group 1: beta2 1.5 must lie in [0, 1]"});
  // A setting Lion does not have in the state is unexpected.
  StateDict extra = lion.state_dict();
  extra["group.0.momentum"] = Tensor::scalar(0.9, DType::float64);
  check_error([&] { lion.load_state_dict(extra); }, {"Lion: load_state_dict: unexpected: group.0.momentum"});
  BOOST_CHECK_EQUAL(lion.step_count(), 3);
  fs::remove_all(path.parent_path());
}

namespace {

// An optimizer over any table, to try tables that are wrong.
struct Beta {
  double beta = 0.5;
};

class OverTable : public optim::OptimizerWith<Beta> {
 public:
  OverTable(optim::NamedParameters parameters, std::span<const optim::Setting<Beta>> table)
      : OptimizerWith("OverTable", {{std::move(parameters)}}, {}, table) {}

 protected:
  void update(std::size_t, const Tensor&, std::int64_t) override {}
  std::vector<std::string> buffer_names(const Beta&) const override { return {}; }
};

constexpr optim::Setting<Beta> kWithoutRate[] = {{"beta", &Beta::beta}};
constexpr optim::Setting<Beta> kNamedTwice[] = {{"lr", &Beta::beta}, {"beta", &Beta::beta}, {"lr", &Beta::beta}};
// Names the state dict's keys would confuse: group.<g>.initial_lr is the schedules' base
// rate, and a dot would split the key.
constexpr optim::Setting<Beta> kNamedInitialLr[] = {{"lr", &Beta::beta}, {"initial_lr", &Beta::beta}};
constexpr optim::Setting<Beta> kNamedWithADot[] = {{"lr", &Beta::beta}, {"beta.1", &Beta::beta}};
constexpr optim::Setting<Beta> kNamedEmpty[] = {{"lr", &Beta::beta}, {"", &Beta::beta}};

}  // namespace

// Every optimizer has lr (schedules set it), and a name is one setting.
// A buffer the group does not declare would be saved by state_dict and refused by
// load_state_dict: refused where it is first made, naming it.
class Undeclared : public optim::OptimizerWith<LionOptions> {
 public:
  explicit Undeclared(optim::NamedParameters parameters)
      : OptimizerWith("Undeclared", {optim::ParamGroup{std::move(parameters)}}, {}, kLionSettings) {}

 protected:
  void update(std::size_t i, const Tensor&, std::int64_t) override {
    buffer(i, "exp_avg");
    buffer(i, "velocity");
  }
  std::vector<std::string> buffer_names(const LionOptions&) const override { return {"exp_avg"}; }
};

BOOST_AUTO_TEST_CASE(a_buffer_the_group_does_not_declare_is_refused) {
  Tensor w = Tensor::zeros({2}).requires_grad_();
  Undeclared opt({{"w", w}});
  w.set_grad(Tensor::ones({2}));
  check_error([&] { opt.step(); },
              {"Undeclared", "buffer 'velocity' of parameter 'w'", "buffer_names: exp_avg", "could not be loaded"});
}

// A buffer named as the state dict's keys cannot hold: state.<parameter>.step is the
// update count (a buffer "step" replaced it, and the checkpoint failed to load), and a
// dot splits the key (saved, then refused on load).
class NamedBuffer : public optim::OptimizerWith<LionOptions> {
 public:
  NamedBuffer(optim::NamedParameters parameters, std::string name)
      : OptimizerWith("NamedBuffer", {optim::ParamGroup{std::move(parameters)}}, {}, kLionSettings),
        name_(std::move(name)) {}

 protected:
  void update(std::size_t i, const Tensor&, std::int64_t) override { buffer(i, name_); }
  std::vector<std::string> buffer_names(const LionOptions&) const override { return {name_}; }

 private:
  std::string name_;
};

BOOST_AUTO_TEST_CASE(a_buffer_named_as_no_key_can_hold_is_refused) {
  for (const std::string name : {"step", "exp.avg", ""}) {
    Tensor w = Tensor::zeros({2}).requires_grad_();
    NamedBuffer opt({{"w", w}}, name);
    w.set_grad(Tensor::ones({2}));
    check_error([&] { opt.step(); }, {"NamedBuffer", "buffer '" + name + "' of parameter 'w'", "cannot be named so"});
  }
}

BOOST_AUTO_TEST_CASE(a_table_without_lr_or_with_a_name_twice_is_refused) {
  Problem p(1);
  check_error([&] { OverTable(p.model.named_parameters(), kWithoutRate); }, {"OverTable", "must include lr"});
  check_error([&] { OverTable(p.model.named_parameters(), kNamedTwice); }, {"OverTable", "lr appears twice"});
  check_error([&] { OverTable(p.model.named_parameters(), kNamedInitialLr); },
              {"OverTable", "the setting 'initial_lr' cannot be named so"});
  check_error([&] { OverTable(p.model.named_parameters(), kNamedWithADot); }, {"the setting 'beta.1'", "no '.'"});
  check_error([&] { OverTable(p.model.named_parameters(), kNamedEmpty); }, {"the setting ''", "not empty"});
}
