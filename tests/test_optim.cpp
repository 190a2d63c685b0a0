#define BOOST_TEST_MODULE optim
#include "fixtures.hpp"
#include "xgrad/optim/optim.hpp"

#include <cmath>
#include <numbers>

using namespace xgrad;
using namespace xgrad::test;

namespace {

// The fixture's problem: loss = mean((tanh(x w + b) - y)^2).
struct Problem {
  Tensor x, y, w, b;
  Tensor loss() const { return mean(pow(tanh(matmul(x, w) + b) - y, 2.0)); }
  optim::NamedParameters parameters() const { return {{"w", w}, {"b", b}}; }
};

Problem fixture_problem() {
  const json p = load_fixture("optim_fixtures.json").at("problem");
  const auto t = [&](const char* key, Shape shape, bool parameter) {
    return Tensor::from_vector(p.at(key).get<std::vector<double>>(), std::move(shape), DType::float64, parameter);
  };
  return {t("x", {5, 3}, false), t("y", {5, 4}, false), t("w0", {3, 4}, true), t("b0", {4}, true)};
}

// The case's parameter groups (named in "groups", each with its own options), or one
// group of every parameter.
std::vector<optim::ParamGroup> groups_of(const json& c, const optim::NamedParameters& params) {
  if (!c.contains("groups")) return {optim::ParamGroup{params}};
  std::vector<optim::ParamGroup> groups;
  for (const json& g : c.at("groups")) {
    optim::ParamGroup group;
    for (const std::string name : g.at("params"))
      for (const auto& named : params)
        if (named.first == name) group.parameters.push_back(named);
    if (g.contains("lr")) group.lr = g.at("lr").get<double>();
    if (g.contains("weight_decay")) group.weight_decay = g.at("weight_decay").get<double>();
    groups.push_back(group);
  }
  return groups;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const json& c, const optim::NamedParameters& named) {
  const std::vector<optim::ParamGroup> params = groups_of(c, named);
  const json& o = c.at("options");
  const std::string kind = c.at("optimizer");
  const auto betas = o.value("betas", std::vector<double>{0.9, 0.999});
  if (kind == "SGD")
    return std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = o.at("lr"),
                                                                  .momentum = o.value("momentum", 0.0),
                                                                  .dampening = o.value("dampening", 0.0),
                                                                  .nesterov = o.value("nesterov", false),
                                                                  .weight_decay = o.value("weight_decay", 0.0)});
  if (kind == "Adam")
    return std::make_unique<optim::Adam>(params, optim::AdamOptions{.lr = o.at("lr"),
                                                                    .beta1 = betas[0],
                                                                    .beta2 = betas[1],
                                                                    .eps = o.value("eps", 1e-8),
                                                                    .weight_decay = o.value("weight_decay", 0.0),
                                                                    .amsgrad = o.value("amsgrad", false)});
  return std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = o.at("lr"),
                                                                    .beta1 = betas[0],
                                                                    .beta2 = betas[1],
                                                                    .eps = o.value("eps", 1e-8),
                                                                    .weight_decay = o.value("weight_decay", 0.01),
                                                                    .amsgrad = o.value("amsgrad", false)});
}

void train_steps(const Problem& p, optim::Optimizer& opt, int steps, std::vector<double>* losses = nullptr) {
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    Tensor loss = p.loss();
    loss.backward();
    opt.step();
    if (losses) losses->push_back(loss.item());
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(trajectories_match_torch_step_for_step) {
  const json cases = load_cases("optim_fixtures.json");
  for (const auto& [name, c] : cases.items()) {
    BOOST_TEST_CONTEXT(name) {
      Problem p = fixture_problem();
      auto opt = make_optimizer(c, p.parameters());
      const json& trajectory = c.at("trajectory");
      for (std::size_t step = 0; step < trajectory.size(); ++step) {
        std::vector<double> loss;
        train_steps(p, *opt, 1, &loss);
        const json& expected = trajectory[step];
        BOOST_CHECK_CLOSE(loss[0], expected.at("loss").get<double>(), 1e-6);
        check_matches(name + " w after step " + std::to_string(step + 1), p.w,
                      {{"shape", {3, 4}}, {"values", expected.at("w")}}, 1e-6);
        check_matches(name + " b after step " + std::to_string(step + 1), p.b,
                      {{"shape", {4}}, {"values", expected.at("b")}}, 1e-6);
      }
      BOOST_CHECK_EQUAL(opt->step_count(), 20);
    }
  }
}

BOOST_AUTO_TEST_CASE(float32_parameters_update_too) {
  Problem p = fixture_problem();
  Tensor w = p.w.detach().to(DType::float32).requires_grad_(), b = p.b.detach().to(DType::float32).requires_grad_();
  optim::Adam adam({{"w", w}, {"b", b}}, {.lr = 0.01});
  const Tensor x = p.x.to(DType::float32), y = p.y.to(DType::float32);
  double first = 0, last = 0;
  for (int s = 0; s < 50; ++s) {
    adam.zero_grad();
    Tensor loss = mean(pow(tanh(matmul(x, w) + b) - y, 2.0));
    loss.backward();
    adam.step();
    (s == 0 ? first : last) = loss.item();
  }
  BOOST_CHECK(last < first);
}

BOOST_AUTO_TEST_CASE(parameters_without_gradient_are_left_alone) {
  Problem p = fixture_problem();
  Tensor unused = Tensor::ones({2}, DType::float64).requires_grad_();
  optim::SGD sgd({{"w", p.w}, {"b", p.b}, {"unused", unused}}, {.lr = 0.1, .momentum = 0.9});
  train_steps(p, sgd, 3);
  check_close(unused.to_vector(), {1.0, 1.0});
  BOOST_CHECK(!sgd.state_dict().count("state.unused.step"));
}

BOOST_AUTO_TEST_CASE(parameter_groups_keep_their_own_rates_through_schedules_and_state) {
  Problem p = fixture_problem();
  optim::AdamW opt({{{{"w", p.w}}, {}, 0.1}, {{{"b", p.b}}, 0.02, 0.0}}, {.lr = 0.01});
  BOOST_CHECK_EQUAL(opt.num_groups(), 2u);
  BOOST_CHECK_EQUAL(opt.group_lr(1), 0.02);
  BOOST_CHECK_EQUAL(opt.group_weight_decay(0), 0.1);
  optim::WarmupCosineLR schedule(opt, 10, 100, 0.001);
  BOOST_CHECK_CLOSE(opt.group_lr(0), 0.001, 1e-12);  // each group warms up from its own base
  BOOST_CHECK_CLOSE(opt.group_lr(1), 0.002, 1e-12);
  for (int i = 0; i < 55; ++i) schedule.step();
  BOOST_CHECK_CLOSE(opt.group_lr(0), schedule.rate_from(0.01, 55), 1e-12);
  BOOST_CHECK_CLOSE(opt.group_lr(1), schedule.rate_from(0.02, 55), 1e-12);
  train_steps(p, opt, 3);
  // The state holds every group's rate; another optimizer with the same groups takes it.
  const StateDict state = opt.state_dict();
  BOOST_CHECK(state.count("group.1.lr"));
  Problem q = fixture_problem();
  optim::AdamW other({{{{"w", q.w}}, {}, 0.1}, {{{"b", q.b}}, 0.5, 0.0}}, {.lr = 0.3});
  other.load_state_dict(state);
  BOOST_CHECK_EQUAL(other.group_lr(0), opt.group_lr(0));
  BOOST_CHECK_EQUAL(other.group_lr(1), opt.group_lr(1));
  // Errors name the group.
  check_error([&] { optim::SGD({{{{"w", q.w}}, {}, -1.0}}, {.lr = 0.1}); }, {"SGD", "group 0", "weight_decay"});
  check_error([&] { optim::SGD({{{{"w", q.w}}, std::nan(""), {}}}, {.lr = 0.1}); }, {"SGD", "learning rate"});
  check_error([&] { optim::SGD(std::vector<optim::ParamGroup>{}, {.lr = 0.1}); }, {"SGD", "group"});
  check_error([&] { opt.set_group_lr(2, 0.1); }, {"AdamW", "group 2"});
  optim::AdamW one({{"w", q.w}});
  check_error([&] { one.load_state_dict(state); }, {"unexpected: group.1.lr"});
}

BOOST_AUTO_TEST_CASE(state_dict_round_trip_continues_identically) {
  for (bool amsgrad : {false, true}) {
    Problem a = fixture_problem();
    optim::Adam adam(a.parameters(), {.lr = 0.01, .amsgrad = amsgrad});
    train_steps(a, adam, 5);
    // Copy parameters and optimizer state into fresh objects, then run both on.
    Problem b = fixture_problem();
    b.w.set_data(a.w);
    b.b.set_data(a.b);
    optim::Adam resumed(b.parameters(), {.lr = 0.5, .amsgrad = amsgrad});
    resumed.load_state_dict(adam.state_dict());
    BOOST_CHECK_EQUAL(resumed.lr(), 0.01);
    BOOST_CHECK_EQUAL(resumed.step_count(), 5);
    std::vector<double> la, lb;
    train_steps(a, adam, 5, &la);
    train_steps(b, resumed, 5, &lb);
    BOOST_CHECK(la == lb);
    BOOST_CHECK(a.w.to_vector() == b.w.to_vector());
  }
}

BOOST_AUTO_TEST_CASE(state_dict_load_errors_change_nothing) {
  Problem p = fixture_problem();
  optim::Adam adam(p.parameters(), {.lr = 0.01});
  train_steps(p, adam, 2);
  StateDict bad = adam.state_dict();
  bad["state.w.exp_avg"] = Tensor::zeros({4, 3}, DType::float64);
  bad["state.nothing.exp_avg"] = Tensor::zeros({1}, DType::float64);
  bad.erase("lr");
  const StateDict before = adam.state_dict();
  const auto m_before = before.at("state.w.exp_avg").to_vector();
  check_error([&] { adam.load_state_dict(bad); },
              {"Adam: load_state_dict", "missing: lr", "state.w.exp_avg expects [3, 4], got [4, 3]",
               "unexpected: state.nothing.exp_avg"});
  BOOST_CHECK(adam.state_dict().at("state.w.exp_avg").to_vector() == m_before);
  BOOST_CHECK_EQUAL(adam.step_count(), 2);
}

BOOST_AUTO_TEST_CASE(bad_options_are_errors) {
  Problem p = fixture_problem();
  check_error([&] { optim::SGD(p.parameters(), {.lr = -1}); }, {"SGD", "learning rate"});
  check_error([&] { optim::SGD(p.parameters(), {.lr = 0.1, .nesterov = true}); }, {"SGD", "nesterov"});
  check_error([&] { optim::Adam(p.parameters(), {.beta1 = 1.0}); }, {"Adam", "betas"});
  check_error([&] { optim::AdamW(p.parameters(), {.weight_decay = -0.1}); }, {"AdamW", "weight_decay"});
  check_error([&] { optim::SGD({{"x", Tensor::ones({2})}}, {}); }, {"SGD", "'x'", "requires grad"});
  check_error([&] { optim::SGD({{"w", p.w}, {"w", p.b}}, {}); }, {"SGD", "'w'", "twice"});
}

BOOST_AUTO_TEST_CASE(clip_grad_norm_returns_the_norm_and_scales) {
  Tensor a = Tensor::from_vector({3.0, 0.0}, {2}, DType::float64, true);
  Tensor b = Tensor::from_vector({4.0}, {1}, DType::float64, true);
  sum(a * a / 2.0).backward();  // grad a = (3, 0)
  sum(b * b / 2.0).backward();  // grad b = (4)
  BOOST_CHECK_CLOSE(optim::clip_grad_norm({a, b}, 10.0), 5.0, 1e-12);
  check_close(a.grad().to_vector(), {3.0, 0.0});  // under the limit: untouched
  BOOST_CHECK_CLOSE(optim::clip_grad_norm({a, b}, 1.0), 5.0, 1e-12);
  const double scale = 1.0 / (5.0 + 1e-6);
  check_close(a.grad().to_vector(), {3.0 * scale, 0.0});
  check_close(b.grad().to_vector(), {4.0 * scale});
  BOOST_CHECK_CLOSE(optim::clip_grad_norm({a, b}, 1.0), 5.0 * scale, 1e-9);

  optim::clip_grad_value({a, b}, 0.5);
  check_close(a.grad().to_vector(), {0.5, 0.0});
  check_close(b.grad().to_vector(), {0.5});

  Tensor c = Tensor::from_vector({1.0}, {1}, DType::float64, true);
  (c * std::numeric_limits<double>::infinity()).backward(Tensor::ones({1}, DType::float64));
  check_error([&] { optim::clip_grad_norm({c}, 1.0); }, {"clip_grad_norm", "not finite"});
}

BOOST_AUTO_TEST_CASE(schedules_give_the_documented_rates) {
  Problem p = fixture_problem();
  optim::SGD sgd(p.parameters(), {.lr = 0.1});
  {
    optim::ConstantLR constant(sgd);
    constant.step();
    BOOST_CHECK_EQUAL(sgd.lr(), 0.1);
  }
  {
    optim::StepLR decay(sgd, 10, 0.5);
    BOOST_CHECK_CLOSE(decay.rate(9), 0.1, 1e-12);
    BOOST_CHECK_CLOSE(decay.rate(10), 0.05, 1e-12);
    BOOST_CHECK_CLOSE(decay.rate(25), 0.025, 1e-12);
    for (int i = 0; i < 10; ++i) decay.step();
    BOOST_CHECK_CLOSE(sgd.lr(), 0.05, 1e-12);
  }
  sgd.set_lr(0.1);
  {
    optim::WarmupCosineLR cosine(sgd, 10, 110, 0.01);
    BOOST_CHECK_CLOSE(sgd.lr(), 0.01, 1e-12);          // update 0: base / warmup
    BOOST_CHECK_CLOSE(cosine.rate(4), 0.05, 1e-12);    // linear warmup
    BOOST_CHECK_CLOSE(cosine.rate(9), 0.1, 1e-12);     // the base at the end of warmup
    BOOST_CHECK_CLOSE(cosine.rate(10), 0.1, 1e-12);    // cosine starts at the base
    BOOST_CHECK_CLOSE(cosine.rate(60), 0.055, 1e-12);  // half way: (base + min) / 2
    BOOST_CHECK_CLOSE(cosine.rate(110), 0.01, 1e-12);
    BOOST_CHECK_CLOSE(cosine.rate(500), 0.01, 1e-12);
  }
  sgd.set_lr(1.0);
  {
    // The Annotated Transformer's example: d_model 512, warmup 4000, factor 1.
    optim::NoamLR noam(sgd, 512, 4000);
    BOOST_CHECK_CLOSE(noam.rate(0), std::pow(512.0, -0.5) * std::pow(4000.0, -1.5), 1e-12);     // s = 1
    BOOST_CHECK_CLOSE(noam.rate(4000), std::pow(512.0, -0.5) * std::pow(4000.0, -0.5), 1e-12);  // the peak
    BOOST_CHECK_CLOSE(noam.rate(16000), std::pow(512.0, -0.5) / 126.49110640673517, 1e-9);      // 1/sqrt(s)
    BOOST_CHECK(noam.rate(3999) < noam.rate(4000) && noam.rate(4001) < noam.rate(4000));
    noam.set_updates(4000);
    BOOST_CHECK_CLOSE(sgd.lr(), noam.rate(4000), 1e-12);
  }
  check_error([&] { optim::WarmupCosineLR(sgd, 10, 5); }, {"WarmupCosineLR", "warmup 10", "total 5"});
}
