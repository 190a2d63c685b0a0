#define BOOST_TEST_MODULE optim
#include "fixtures.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/optim/optim.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
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

// The problem, with the parameters a case names in "frozen" not requiring grad.
Problem fixture_problem(const json& c = json::object()) {
  const json p = load_fixture("optim_fixtures.json").at("problem");
  const std::vector<std::string> frozen = c.value("frozen", std::vector<std::string>{});
  const auto t = [&](const char* key, Shape shape, const std::string& parameter = "") {
    const bool trained = !parameter.empty() && std::find(frozen.begin(), frozen.end(), parameter) == frozen.end();
    return Tensor::from_vector(p.at(key).get<std::vector<double>>(), std::move(shape), DType::float64, trained);
  };
  return {t("x", {5, 3}), t("y", {5, 4}), t("w0", {3, 4}, "w"), t("b0", {4}, "b")};
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
    // By the optimizer's names (flags as 1 or 0); PyTorch's betas are beta1 and beta2.
    for (const auto& [key, value] : g.items())
      if (key == "betas")
        group.settings["beta1"] = value[0].get<double>(), group.settings["beta2"] = value[1].get<double>();
      else if (key != "params")
        group.settings[key] = value.is_boolean() ? value.get<bool>() : value.get<double>();
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
                                                                  .weight_decay = o.value("weight_decay", 0.0),
                                                                  .maximize = o.value("maximize", false)});
  if (kind == "Adam")
    return std::make_unique<optim::Adam>(params, optim::AdamOptions{.lr = o.at("lr"),
                                                                    .beta1 = betas[0],
                                                                    .beta2 = betas[1],
                                                                    .eps = o.value("eps", 1e-8),
                                                                    .weight_decay = o.value("weight_decay", 0.0),
                                                                    .amsgrad = o.value("amsgrad", false),
                                                                    .maximize = o.value("maximize", false)});
  return std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = o.at("lr"),
                                                                    .beta1 = betas[0],
                                                                    .beta2 = betas[1],
                                                                    .eps = o.value("eps", 1e-8),
                                                                    .weight_decay = o.value("weight_decay", 0.01),
                                                                    .amsgrad = o.value("amsgrad", false),
                                                                    .maximize = o.value("maximize", false)});
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
      Problem p = fixture_problem(c);
      auto opt = make_optimizer(c, p.parameters());
      const json& trajectory = c.at("trajectory");
      for (std::size_t step = 0; step < trajectory.size(); ++step) {
        std::vector<double> loss;
        train_steps(p, *opt, 1, &loss);
        const json& expected = trajectory[step];
        BOOST_CHECK_CLOSE(loss[0], expected.at("loss").get<double>(), 1e-11);  // percent: 1e-13
        check_matches(name + " w after step " + std::to_string(step + 1), p.w,
                      {{"shape", {3, 4}}, {"values", expected.at("w")}}, 1e-13);
        check_matches(name + " b after step " + std::to_string(step + 1), p.b,
                      {{"shape", {4}}, {"values", expected.at("b")}}, 1e-13);
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
  optim::AdamW opt({{{{"w", p.w}}, {{"weight_decay", 0.1}}}, {{{"b", p.b}}, {{"lr", 0.02}, {"weight_decay", 0.0}}}},
                   {.lr = 0.01});
  BOOST_CHECK_EQUAL(opt.num_groups(), 2u);
  BOOST_CHECK_EQUAL(opt.group_lr(1), 0.02);
  BOOST_CHECK_EQUAL(opt.group_setting(0, "weight_decay"), 0.1);
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
  optim::AdamW other({{{{"w", q.w}}, {{"weight_decay", 0.1}}}, {{{"b", q.b}}, {{"lr", 0.5}, {"weight_decay", 0.0}}}},
                     {.lr = 0.3});
  other.load_state_dict(state);
  BOOST_CHECK_EQUAL(other.group_lr(0), opt.group_lr(0));
  BOOST_CHECK_EQUAL(other.group_lr(1), opt.group_lr(1));
  // Errors name the group.
  check_error(
      [&] {
        optim::SGD({{{{"w", q.w}}, {{"weight_decay", -1.0}}}}, {.lr = 0.1});
      },
      {"SGD", "group 0", "weight_decay"});
  check_error([&] { optim::SGD({{{{"w", q.w}}, {{"lr", std::nan("")}}}}, {.lr = 0.1}); }, {"SGD", "learning rate"});
  check_error([&] { optim::SGD(std::vector<optim::ParamGroup>{}, {.lr = 0.1}); }, {"SGD", "group"});
  check_error([&] { opt.set_group_lr(2, 0.1); }, {"AdamW", "group 2"});
  optim::AdamW one({{"w", q.w}});
  check_error([&] { one.load_state_dict(state); }, {"AdamW: load_state_dict", "2 parameter groups, this optimizer 1"});
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

// A schedule's base rates (each group's initial_lr) travel in the optimizer's state: a
// resumed run whose optimizer was made with other rates (the defaults), its schedule made
// before the load or after it, runs every later update at the uninterrupted run's rates,
// to the bit, for every kind of schedule and per group. A second schedule made later
// takes the rates of its time, as before.
BOOST_AUTO_TEST_CASE(a_resumed_schedule_runs_from_the_saved_base_rates) {
  using Make = std::function<std::unique_ptr<optim::LRSchedule>(optim::Optimizer&)>;
  const std::vector<std::pair<std::string, Make>> schedules = {
      {"step", [](optim::Optimizer& o) { return std::make_unique<optim::StepLR>(o, 2, 0.5); }},
      {"cosine", [](optim::Optimizer& o) { return std::make_unique<optim::WarmupCosineLR>(o, 2, 9, 0.0); }},
      {"noam", [](optim::Optimizer& o) { return std::make_unique<optim::NoamLR>(o, 16, 3); }},
      {"lambda", [](optim::Optimizer& o) {
         return std::make_unique<optim::LambdaLR>(o, [](std::int64_t u) { return 1.0 / (1.0 + u); });
       }}};
  const auto groups = [](const Problem& p, double second_lr) {
    return std::vector<optim::ParamGroup>{{{{"w", p.w}}, {}}, {{{"b", p.b}}, {{"lr", second_lr}}}};
  };
  for (const auto& [name, make] : schedules)
    for (const bool schedule_first : {true, false}) {
      BOOST_TEST_CONTEXT(name << (schedule_first ? ", made before the load" : ", made after the load")) {
        Problem a = fixture_problem();
        optim::SGD sgd(groups(a, 0.05), {.lr = 0.1, .momentum = 0.9});
        const auto schedule = make(sgd);
        const auto run = [](const Problem& p, optim::Optimizer& opt, optim::LRSchedule& s, int steps) {
          std::vector<double> rates;
          for (int i = 0; i < steps; ++i) {
            train_steps(p, opt, 1);
            s.step();
            rates.push_back(opt.group_lr(0)), rates.push_back(opt.group_lr(1));
          }
          return rates;
        };
        run(a, sgd, *schedule, 3);
        const StateDict saved = sgd.state_dict();
        BOOST_CHECK_EQUAL(saved.at("group.0.initial_lr").item(), 0.1);
        BOOST_CHECK_EQUAL(saved.at("group.1.initial_lr").item(), 0.05);
        Problem b = fixture_problem();
        b.w.set_data(a.w), b.b.set_data(a.b);
        optim::SGD fresh(groups(b, 0.7), {});  // other rates: the state brings the settings
        std::unique_ptr<optim::LRSchedule> resumed;
        if (schedule_first) resumed = make(fresh);
        fresh.load_state_dict(saved);
        if (!schedule_first) resumed = make(fresh);
        resumed->set_updates(3);
        BOOST_CHECK_EQUAL(fresh.group_lr(0), sgd.group_lr(0));
        BOOST_CHECK_EQUAL(fresh.group_lr(1), sgd.group_lr(1));
        BOOST_CHECK(run(a, sgd, *schedule, 4) == run(b, fresh, *resumed, 4));
        BOOST_CHECK(a.w.to_vector() == b.w.to_vector() && a.b.to_vector() == b.b.to_vector());
      }
    }
  // One schedule at a time: a second while the first lives is refused (the state saves one
  // base a group). One made after the first is gone (and after set_lr) starts from the
  // rate of its time.
  Problem p = fixture_problem();
  optim::SGD sgd(p.parameters(), {.lr = 0.1});
  {
    optim::WarmupCosineLR first(sgd, 10, 100);
    check_error([&] { optim::ConstantLR second(sgd); }, {"LRSchedule", "has a schedule already", "LambdaLR"});
    BOOST_CHECK_EQUAL(first.base_lr(), 0.1);
  }
  sgd.set_lr(0.7);
  optim::ConstantLR second(sgd);
  BOOST_CHECK_EQUAL(sgd.lr(), 0.7);
  BOOST_CHECK_EQUAL(*sgd.group_initial_lr(0), 0.7);
  // A state's base rate is checked as a rate is.
  StateDict bad = sgd.state_dict();
  bad["group.0.initial_lr"] = Tensor::scalar(-1.0, DType::float64);
  check_error([&] { sgd.load_state_dict(bad); }, {"SGD: load_state_dict", "group.0.initial_lr -1", "finite and >= 0"});
  bad["group.0.initial_lr"] = Tensor::scalar(0.2, DType::float64);
  bad["group.1.initial_lr"] = Tensor::scalar(0.2, DType::float64);  // a group this optimizer lacks
  check_error([&] { sgd.load_state_dict(bad); }, {"SGD: load_state_dict", "unexpected: group.1.initial_lr"});
  sgd.load_state_dict(bad, /*strict=*/false);
  BOOST_CHECK_EQUAL(*sgd.group_initial_lr(0), 0.2);
  BOOST_CHECK_EQUAL(second.base_lr(), 0.2);  // the live schedule runs from the loaded base
}

// A schedule whose constructor throws leaves the base rates as they were: the next one
// takes a loaded state's base, not the rate the state left mid-schedule. A later load of a
// state without base rates (an older checkpoint) leaves no earlier load's base to take.
BOOST_AUTO_TEST_CASE(a_failed_schedule_leaves_the_base_rates_alone) {
  Problem p = fixture_problem();
  optim::SGD sgd(p.parameters(), {.lr = 0.05});
  StateDict saved;
  {
    optim::StepLR decay(sgd, 1, 0.5);
    train_steps(p, sgd, 1);
    decay.step();
    saved = sgd.state_dict();
  }
  optim::SGD fresh(p.parameters(), {});
  fresh.load_state_dict(saved);
  BOOST_CHECK_EQUAL(fresh.lr(), 0.025);  // mid-schedule
  check_error([&] { optim::WarmupCosineLR(fresh, 100, 50); }, {"WarmupCosineLR", "warmup < total"});
  optim::StepLR resumed(fresh, 1, 0.5);
  BOOST_CHECK_EQUAL(resumed.base_lr(), 0.05);
  StateDict older = saved;
  older.erase("group.0.initial_lr");
  optim::SGD again(p.parameters(), {});
  again.load_state_dict(saved);
  again.load_state_dict(older);
  optim::ConstantLR constant(again);
  BOOST_CHECK_EQUAL(constant.base_lr(), 0.025);  // the rate the older state gave
}

BOOST_AUTO_TEST_CASE(state_dict_load_errors_change_nothing) {
  Problem p = fixture_problem();
  optim::Adam adam(p.parameters(), {.lr = 0.01});
  train_steps(p, adam, 2);
  StateDict bad = adam.state_dict();
  bad["state.w.exp_avg"] = Tensor::zeros({4, 3}, DType::float64);
  bad["state.nothing.exp_avg"] = Tensor::zeros({1}, DType::float64);
  bad.erase("group.0.lr");
  const StateDict before = adam.state_dict();
  const auto m_before = before.at("state.w.exp_avg").to_vector();
  check_error([&] { adam.load_state_dict(bad); },
              {"Adam: load_state_dict", "missing: group.0.lr", "state.w.exp_avg expects [3, 4], got [4, 3]",
               "unexpected: state.nothing.exp_avg"});
  BOOST_CHECK(adam.state_dict().at("state.w.exp_avg").to_vector() == m_before);
  BOOST_CHECK_EQUAL(adam.step_count(), 2);
}

namespace {

// Two groups (w, b) that differ in every setting the optimizer has, or (plain) the same
// groups with default settings, which a loaded state must replace.
std::unique_ptr<optim::Optimizer> mixed_groups(const std::string& kind, const Problem& p, bool plain = false) {
  const optim::NamedParameters w{{"w", p.w}}, b{{"b", p.b}};
  if (plain) {
    const std::vector<optim::ParamGroup> groups{{w}, {b}};
    if (kind == "SGD") return std::make_unique<optim::SGD>(groups, optim::SGDOptions{.lr = 0.5});
    if (kind == "Adam") return std::make_unique<optim::Adam>(groups);
    return std::make_unique<optim::AdamW>(groups);
  }
  if (kind == "SGD")
    return std::make_unique<optim::SGD>(
        std::vector<optim::ParamGroup>{
            {.parameters = w, .settings = {{"momentum", 0.5}, {"nesterov", 1}}},
            {.parameters = b, .settings = {{"lr", 0.05}, {"dampening", 0.2}, {"maximize", 1}}}},
        optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
  const std::vector<optim::ParamGroup> groups{
      {.parameters = w, .settings = {{"beta1", 0.8}, {"amsgrad", 1}}},
      {.parameters = b,
       .settings = {{"lr", 0.05}, {"weight_decay", 0.0}, {"beta2", 0.9}, {"eps", 1e-3}, {"maximize", 1}}}};
  if (kind == "Adam")
    return std::make_unique<optim::Adam>(groups, optim::AdamOptions{.lr = 0.01, .weight_decay = 0.01});
  return std::make_unique<optim::AdamW>(groups, optim::AdamWOptions{.lr = 0.01, .weight_decay = 0.1});
}

}  // namespace

BOOST_AUTO_TEST_CASE(groups_may_set_every_option_of_their_optimizer) {
  Problem p = fixture_problem();
  optim::SGD sgd({{.parameters = {{"w", p.w}}, .settings = {{"momentum", 0.5}, {"nesterov", true}, {"maximize", 1}}},
                  {.parameters = {{"b", p.b}}, .settings = {{"lr", 0.2}, {"dampening", 0.3}}}},
                 {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
  const optim::SGDOptions w = sgd.group_options(0), b = sgd.group_options(1);
  BOOST_CHECK(w.lr == 0.1 && w.momentum == 0.5 && w.dampening == 0.0 && w.nesterov && w.weight_decay == 0.01 &&
              w.maximize);
  BOOST_CHECK(b.lr == 0.2 && b.momentum == 0.9 && b.dampening == 0.3 && !b.nesterov && b.weight_decay == 0.01 &&
              !b.maximize);
  BOOST_CHECK_EQUAL(sgd.options().momentum, 0.9);  // the defaults stay as given
  BOOST_CHECK_EQUAL(sgd.group_setting(0, "nesterov"), 1.0);
  BOOST_CHECK(sgd.setting_names() ==
              std::vector<std::string>({"lr", "weight_decay", "momentum", "dampening", "nesterov", "maximize"}));
  check_error([&] { sgd.group_setting(0, "beta1"); }, {"SGD", "no setting 'beta1'", "momentum"});
  check_error([&] { sgd.group_setting(2, "lr"); }, {"SGD", "group 2 does not exist"});

  const auto adamw = mixed_groups("AdamW", p);
  const optim::AdamWOptions a0 = dynamic_cast<optim::AdamW&>(*adamw).group_options(0);
  const optim::AdamWOptions a1 = dynamic_cast<optim::AdamW&>(*adamw).group_options(1);
  BOOST_CHECK(a0.lr == 0.01 && a0.beta1 == 0.8 && a0.beta2 == 0.999 && a0.eps == 1e-8 && a0.weight_decay == 0.1 &&
              a0.amsgrad && !a0.maximize);
  BOOST_CHECK(a1.lr == 0.05 && a1.beta1 == 0.9 && a1.beta2 == 0.9 && a1.eps == 1e-3 && a1.weight_decay == 0.0 &&
              !a1.amsgrad && a1.maximize);
  train_steps(p, *adamw, 2);  // the amsgrad group alone keeps max_exp_avg_sq
  const StateDict state = adamw->state_dict();
  BOOST_CHECK(state.count("state.w.max_exp_avg_sq") && !state.count("state.b.max_exp_avg_sq"));
}

namespace {

// An optimizer of `grouped`'s kind over `parameters` alone, its options group g's.
std::unique_ptr<optim::Optimizer> with_group_options(const optim::Optimizer& grouped, std::size_t g,
                                                     const optim::NamedParameters& parameters) {
  if (const auto* sgd = dynamic_cast<const optim::SGD*>(&grouped))
    return std::make_unique<optim::SGD>(parameters, sgd->group_options(g));
  if (const auto* adam = dynamic_cast<const optim::Adam*>(&grouped))
    return std::make_unique<optim::Adam>(parameters, adam->group_options(g));
  return std::make_unique<optim::AdamW>(parameters, dynamic_cast<const optim::AdamW&>(grouped).group_options(g));
}

}  // namespace

BOOST_AUTO_TEST_CASE(group_overrides_reach_the_update) {
  // Each group's parameters train bit for bit as under an optimizer of their own made
  // with the group's options, also after a group's rate changes.
  for (const std::string kind : {"SGD", "Adam", "AdamW"}) {
    BOOST_TEST_CONTEXT(kind) {
      Problem a = fixture_problem(), b = fixture_problem();
      const auto grouped = mixed_groups(kind, a);
      const std::unique_ptr<optim::Optimizer> alone[] = {with_group_options(*grouped, 0, {{"w", b.w}}),
                                                         with_group_options(*grouped, 1, {{"b", b.b}})};
      for (int step = 0; step < 6; ++step) {
        if (step == 3) {
          grouped->set_group_lr(1, 0.003);
          alone[1]->set_lr(0.003);
        }
        grouped->zero_grad();
        a.loss().backward();
        grouped->step();
        for (const auto& opt : alone) opt->zero_grad();
        b.loss().backward();
        for (const auto& opt : alone) opt->step();
      }
      BOOST_CHECK(a.w.to_vector() == b.w.to_vector());
      BOOST_CHECK(a.b.to_vector() == b.b.to_vector());
      BOOST_CHECK(a.w.to_vector() != fixture_problem().w.to_vector());  // it did train
    }
  }
}

BOOST_AUTO_TEST_CASE(groups_setting_what_the_optimizer_lacks_or_bad_values_are_refused) {
  Problem p = fixture_problem();
  const optim::NamedParameters w{{"w", p.w}}, b{{"b", p.b}};
  check_error(
      [&] {
        optim::SGD({{.parameters = w}, {.parameters = b, .settings = {{"beta1", 0.9}}}}, {.lr = 0.1});
      },
      {"SGD: group 1 sets beta1, which SGD does not have (it has lr, weight_decay, momentum, dampening, nesterov, "
       "maximize)"});
  check_error(
      [&] {
        optim::Adam({{.parameters = w, .settings = {{"momentum", 0.9}}}});
      },
      {"Adam: group 0 sets momentum, which Adam does not have", "beta1"});
  check_error(
      [&] {
        optim::AdamW({{.parameters = w, .settings = {{"nesterov", 0}}}});
      },  // even 0 is a setting
      {"AdamW: group 0 sets nesterov, which AdamW does not have"});
  check_error(
      [&] {
        optim::SGD({{.parameters = w, .settings = {{"nesterov", 0.5}}}}, {.lr = 0.1, .momentum = 0.9});
      },
      {"SGD: group 0: nesterov 0.5 must be 0 or 1"});
  // Each group is checked like the options, and named.
  check_error(
      [&] {
        optim::SGD({{.parameters = w}, {.parameters = b, .settings = {{"nesterov", 1}}}}, {.lr = 0.1});
      },
      {"SGD: group 1: nesterov needs momentum > 0 and dampening 0 (momentum 0.0, dampening 0.0)"});
  check_error(
      [&] {
        optim::SGD({{.parameters = w, .settings = {{"dampening", 0.5}}}},
                   {.lr = 0.1, .momentum = 0.9, .nesterov = true});
      },
      {"SGD: group 0: nesterov needs", "dampening 0.5"});
  check_error(
      [&] {
        optim::SGD({{.parameters = w, .settings = {{"momentum", -0.5}}}}, {.lr = 0.1});
      },
      {"SGD: group 0: momentum -0.5 must be finite and >= 0"});
  check_error(
      [&] {
        optim::Adam({{.parameters = w}, {.parameters = b, .settings = {{"beta2", 1.0}}}});
      },
      {"Adam: group 1: beta2 1.0 must lie in [0, 1)"});
  check_error(
      [&] {
        optim::AdamW({{.parameters = w, .settings = {{"eps", -1.0}}}, {.parameters = b, .settings = {{"lr", -0.1}}}});
      },
      {"AdamW: group 0: eps -1.0 must be finite and >= 1.17549e-38", "group 1: learning rate -0.1"});
  // An eps that is 0 to float32's flushed arithmetic would make an element whose gradient
  // is 0 NaN (0 / 0): refused, 0 and 1e-50 alike.
  for (const double eps : {0.0, 1e-50})
    check_error([&] { optim::Adam({{.parameters = w}}, {.eps = eps}); },
                {"Adam: eps", "must be finite and >= 1.17549e-38"});
  // Bad options are named as options: no group set them.
  check_error(
      [&] {
        optim::SGD({{.parameters = w, .settings = {{"momentum", 0.5}}}}, {.lr = 0.1, .momentum = -1.0});
      },
      {"SGD: momentum -1.0 must be finite and >= 0"});
}

BOOST_AUTO_TEST_CASE(frozen_parameters_are_kept_but_left_alone) {
  Problem p = fixture_problem();
  optim::SGD sgd(p.parameters(), {.lr = 0.1, .momentum = 0.9});
  p.loss().backward();
  p.b.requires_grad_(false);  // frozen while it still holds a gradient: that is not applied either
  BOOST_REQUIRE(p.b.grad().defined());
  const std::vector<double> b0 = p.b.to_vector(), w0 = p.w.to_vector();
  sgd.step();
  train_steps(p, sgd, 3);
  BOOST_CHECK(p.b.to_vector() == b0);
  BOOST_CHECK(p.w.to_vector() != w0);
  BOOST_CHECK_EQUAL(sgd.parameters().size(), 2u);
  StateDict state = sgd.state_dict();
  BOOST_CHECK_EQUAL(state.at("state.w.step").item(), 4.0);
  for (const auto& [key, tensor] : state) BOOST_CHECK_MESSAGE(key.rfind("state.b.", 0) != 0, key);
  // Unfrozen, it trains from there; its name never changed.
  p.b.requires_grad_(true);
  train_steps(p, sgd, 1);
  BOOST_CHECK(p.b.to_vector() != b0);
  BOOST_CHECK_EQUAL(sgd.state_dict().at("state.b.step").item(), 1.0);
  // A frozen tensor given under two names is still one tensor given twice.
  const Tensor frozen = Tensor::ones({2});
  check_error([&] { optim::Adam({{"a", frozen}, {"b", frozen}}); }, {"Adam", "'a'", "'b'", "same tensor"});
}

BOOST_AUTO_TEST_CASE(state_dict_round_trip_of_group_settings_continues_bitwise) {
  for (const std::string kind : {"SGD", "Adam", "AdamW"}) {
    BOOST_TEST_CONTEXT(kind) {
      Problem a = fixture_problem();
      auto opt = mixed_groups(kind, a);
      train_steps(a, *opt, 5);
      const StateDict state = opt->state_dict();
      BOOST_CHECK(!state.count("lr"));
      for (std::size_t g = 0; g < 2; ++g)
        for (const std::string& name : opt->setting_names())
          BOOST_CHECK_EQUAL(state.at(str("group.", g, ".", name)).item(), opt->group_setting(g, name));
      // A fresh optimizer made with default settings takes every group's from the state.
      Problem b = fixture_problem();
      b.w.set_data(a.w);
      b.b.set_data(a.b);
      auto resumed = mixed_groups(kind, b, true);
      resumed->load_state_dict(state);
      for (std::size_t g = 0; g < 2; ++g)
        for (const std::string& name : opt->setting_names())
          BOOST_CHECK_EQUAL(resumed->group_setting(g, name), opt->group_setting(g, name));
      std::vector<double> la, lb;
      train_steps(a, *opt, 5, &la);
      train_steps(b, *resumed, 5, &lb);
      BOOST_CHECK(la == lb);
      BOOST_CHECK(a.w.to_vector() == b.w.to_vector());
      BOOST_CHECK(a.b.to_vector() == b.b.to_vector());
    }
  }
  Problem p = fixture_problem();
  const StateDict sgd = mixed_groups("SGD", p)->state_dict();
  BOOST_CHECK_EQUAL(sgd.at("group.0.nesterov").item(), 1.0);  // flags as 0/1
  BOOST_CHECK_EQUAL(sgd.at("group.1.maximize").item(), 1.0);
  BOOST_CHECK_EQUAL(sgd.at("group.1.dampening").item(), 0.2);
}

// A step count that is there but wrong is said as wrong, never as missing.
BOOST_AUTO_TEST_CASE(a_loaded_step_count_is_judged_as_given) {
  Problem p = fixture_problem();
  optim::Adam adam(p.parameters(), {.lr = 0.1});
  train_steps(p, adam, 2);
  for (const double bad : {std::nan(""), -1.0, 0.5, 1e300}) {
    StateDict state = adam.state_dict();
    state["state.w.step"] = Tensor::scalar(bad, DType::float64);
    optim::Adam fresh(p.parameters(), {.lr = 0.1});
    try {
      fresh.load_state_dict(state);
      BOOST_ERROR("a step of " << bad << " was accepted");
    } catch (const Error& e) {
      const std::string message = e.what();
      BOOST_CHECK_MESSAGE(message.find("state.w.step must be a whole number") != std::string::npos, message);
      BOOST_CHECK_MESSAGE(message.find("missing") == std::string::npos, message);
    }
  }
  StateDict without = adam.state_dict();
  without.erase("state.w.step");
  check_error([&] { optim::Adam(p.parameters(), {.lr = 0.1}).load_state_dict(without); }, {"missing: state.w.step"});
}

// A parameter updated twice whose moments are gone would restart them from zeros under
// step 2's bias correction (its next step several times lr, lr / eps where the gradient
// is 0). Strict loads refuse it; the others start that parameter afresh.
BOOST_AUTO_TEST_CASE(a_strict_load_wants_the_buffers_every_update_makes) {
  Problem p = fixture_problem();
  optim::Adam adam(p.parameters(), {.lr = 0.1});
  train_steps(p, adam, 2);
  for (const std::string buffer : {"exp_avg", "exp_avg_sq"}) {
    BOOST_TEST_CONTEXT(buffer) {
      StateDict without = adam.state_dict();
      without.erase("state.w." + buffer);
      check_error([&] { optim::Adam(p.parameters(), {.lr = 0.1}).load_state_dict(without); },
                  {"Adam", "missing: state.w." + buffer});
      optim::Adam partial(p.parameters(), {.lr = 0.1});
      partial.load_state_dict(without, /*strict=*/false);
      const StateDict loaded = partial.state_dict();
      BOOST_CHECK(!loaded.count("state.w.step") && !loaded.count("state.w.exp_avg") &&
                  !loaded.count("state.w.exp_avg_sq"));
      BOOST_CHECK_EQUAL(loaded.at("state.b.step").item(), 2.0);  // the others as saved
    }
  }
  // amsgrad switched on mid-run: its maximum comes with the next update, and the state
  // saved before that update loads.
  optim::Adam switched(p.parameters(), {.lr = 0.1});
  train_steps(p, switched, 1);
  StateDict state = switched.state_dict();
  state["group.0.amsgrad"] = Tensor::scalar(1, DType::float64);
  optim::Adam resumed(p.parameters(), {.lr = 0.1});
  BOOST_CHECK_NO_THROW(resumed.load_state_dict(state));
  BOOST_CHECK_EQUAL(resumed.group_setting(0, "amsgrad"), 1.0);
}

BOOST_AUTO_TEST_CASE(loaded_group_settings_are_checked_before_they_are_used) {
  Problem p = fixture_problem();
  auto adam = mixed_groups("Adam", p);
  train_steps(p, *adam, 2);
  const StateDict good = adam->state_dict();
  const auto with = [&](const std::string& key, const Tensor& value) {
    StateDict s = good;
    s[key] = value;
    return s;
  };
  const auto number = [](double v) { return Tensor::scalar(v, DType::float64); };
  StateDict no_eps = good;
  no_eps.erase("group.1.eps");
  const std::vector<std::pair<StateDict, std::string>> damaged = {
      {with("group.1.beta1", number(1.5)), "group 1: beta1 1.5 must lie in [0, 1)"},
      {with("group.0.amsgrad", number(0.5)), "group 0: amsgrad 0.5 must be 0 or 1"},
      {with("group.0.eps", number(std::nan(""))), "group 0: eps"},
      {with("group.1.lr", number(-1)), "group 1: learning rate -1.0"},
      {with("group.0.lr", Tensor::zeros({2}, DType::float64)), "group.0.lr must hold one number"},
      {with("group.0.momentum", number(0.9)), "unexpected: group.0.momentum"},
      {with("group.2.lr", number(0.1)), "the state holds 3 parameter groups, this optimizer 2"},
      // The buffers must be those of the settings loaded: without amsgrad, no maximum.
      {with("group.0.amsgrad", number(0)), "unexpected: state.w.max_exp_avg_sq"},
      {no_eps, "missing: group.1.eps"},
  };
  for (const auto& [state, what] : damaged) {
    BOOST_TEST_CONTEXT(what) {
      check_error([&] { adam->load_state_dict(state); }, {"Adam: load_state_dict", what});
      BOOST_CHECK_EQUAL(adam->group_setting(0, "amsgrad"), 1.0);  // unchanged
      BOOST_CHECK_EQUAL(adam->group_lr(1), 0.05);
    }
  }
  // Not strict: a group too many is ignored, and a state with fewer groups sets those it has.
  BOOST_CHECK_NO_THROW(adam->load_state_dict(with("group.2.lr", number(0.1)), false));
  Problem q = fixture_problem();
  optim::Adam one({{"w", q.w}});
  check_error([&] { one.load_state_dict(good); }, {"Adam: load_state_dict", "2 parameter groups, this optimizer 1"});
  one.load_state_dict(good, false);
  BOOST_CHECK_EQUAL(one.group_setting(0, "beta1"), 0.8);
  BOOST_CHECK_EQUAL(one.group_setting(0, "amsgrad"), 1.0);
  Tensor b2 = Tensor::ones({4}, DType::float64).requires_grad_();
  optim::Adam three({{.parameters = {{"w", q.w}}},
                     {.parameters = {{"b", q.b}}},
                     {.parameters = {{"c", b2}}, .settings = {{"lr", 0.7}}}});
  three.load_state_dict(good, false);
  BOOST_CHECK_EQUAL(three.group_lr(1), 0.05);
  BOOST_CHECK_EQUAL(three.group_lr(2), 0.7);  // not in the state: kept
}

BOOST_AUTO_TEST_CASE(older_states_with_only_rates_still_load) {
  Problem a = fixture_problem();
  optim::AdamW opt({{{{"w", a.w}}, {{"weight_decay", 0.1}}}, {{{"b", a.b}}, {{"lr", 0.02}, {"weight_decay", 0.0}}}},
                   {.lr = 0.01});
  train_steps(a, opt, 3);
  // As optimizers wrote it before they kept every setting: "lr" (the first group's) and
  // "group.<g>.lr" for the others; the trainer's older checkpoints hold this.
  StateDict legacy;
  for (const auto& [key, tensor] : opt.state_dict())
    if (key.rfind("group.", 0) != 0) legacy[key] = tensor;
  legacy["lr"] = Tensor::scalar(0.003, DType::float64);
  legacy["group.1.lr"] = Tensor::scalar(0.004, DType::float64);
  Problem b = fixture_problem();
  optim::AdamW resumed({{{{"w", b.w}}, {{"weight_decay", 0.1}}}, {{{"b", b.b}}, {{"lr", 0.5}, {"weight_decay", 0.0}}}},
                       {.lr = 0.3, .beta2 = 0.99});
  resumed.load_state_dict(legacy);
  BOOST_CHECK_EQUAL(resumed.group_lr(0), 0.003);
  BOOST_CHECK_EQUAL(resumed.group_lr(1), 0.004);
  BOOST_CHECK_EQUAL(resumed.group_setting(0, "beta2"), 0.99);  // not in the state: as made
  BOOST_CHECK_EQUAL(resumed.group_setting(0, "weight_decay"), 0.1);
  BOOST_CHECK_EQUAL(resumed.step_count(), 3);
  BOOST_CHECK(resumed.state_dict().at("state.w.exp_avg").to_vector() == legacy.at("state.w.exp_avg").to_vector());
  const StateDict again = resumed.state_dict();  // saved in today's form
  BOOST_CHECK(again.count("group.0.lr") && again.count("group.1.beta2") && !again.count("lr"));

  StateDict both = legacy;
  both["group.0.lr"] = Tensor::scalar(0.003, DType::float64);
  check_error([&] { resumed.load_state_dict(both); }, {"AdamW: load_state_dict", "lr and group.0.lr"});
  StateDict one_group = legacy;
  one_group.erase("group.1.lr");
  check_error([&] { resumed.load_state_dict(one_group); }, {"1 parameter group, this optimizer 2"});
  StateDict nan_lr = legacy;
  nan_lr["lr"] = Tensor::scalar(std::nan(""), DType::float64);
  check_error([&] { resumed.load_state_dict(nan_lr); }, {"group 0: learning rate"});
  BOOST_CHECK_EQUAL(resumed.group_lr(0), 0.003);
}

BOOST_AUTO_TEST_CASE(bad_options_are_errors) {
  Problem p = fixture_problem();
  check_error([&] { optim::SGD(p.parameters(), {.lr = -1}); }, {"SGD", "learning rate"});
  check_error([&] { optim::SGD(p.parameters(), {.lr = 0.1, .nesterov = true}); }, {"SGD", "nesterov"});
  check_error([&] { optim::Adam(p.parameters(), {.beta1 = 1.0}); }, {"Adam", "beta1 1.0 must lie in [0, 1)"});
  check_error([&] { optim::AdamW(p.parameters(), {.weight_decay = -0.1}); }, {"AdamW", "weight_decay"});
  check_error([&] { optim::SGD({{"x", p.w * 2.0}}, {}); }, {"SGD", "'x'", "must be a leaf"});
  check_error([&] { optim::SGD({{"u", Tensor()}}, {}); }, {"SGD", "'u'", "undefined"});
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
  // Without the error, as torch.nn.utils.clip_grad_norm_(error_if_nonfinite=False): the
  // gradients are scaled by max_norm / (norm + 1e-6), 0 for an infinite norm.
  Tensor d = Tensor::from_vector({2.0, 1.0}, {2}, DType::float64, true);
  (d * Tensor::from_vector({std::numeric_limits<double>::infinity(), 1.0}, {2}, DType::float64))
      .backward(Tensor::ones({2}, DType::float64));
  BOOST_CHECK(std::isinf(optim::clip_grad_norm({d}, 1.0, false)));
  const std::vector<double> scaled = d.grad().to_vector();
  BOOST_CHECK(std::isnan(scaled[0]));  // infinity x 0
  BOOST_CHECK_EQUAL(scaled[1], 0.0);
  Tensor e = Tensor::from_vector({1.0}, {1}, DType::float64, true);
  (e * std::numeric_limits<double>::quiet_NaN()).backward(Tensor::ones({1}, DType::float64));
  BOOST_CHECK(std::isnan(optim::clip_grad_norm({e}, 1.0, false)));
  BOOST_CHECK(std::isnan(e.grad().item()));
}

// The float32 gradient norm (sums of squares in float64, 16 lanes a chunk, vectors of
// them on AVX-512) against the norm in float64 of the same values: every square is exact
// in float64, so only the additions round, n of them at most 2^-53 each. Lengths around
// the lanes and past one chunk (16K), and the same bits on 1, 2 and 3 threads.
BOOST_AUTO_TEST_CASE(float32_gradient_norm_within_its_additions_rounding) {
  const int threads = num_threads();
  for (const std::size_t n : {1, 15, 16, 17, 33, 1000, 40000}) {
    Tensor a = Tensor::zeros({n}, DType::float32).requires_grad_(), b = Tensor::zeros({7}, DType::float32);
    b.requires_grad_();
    Generator gen(n);
    sum(a * Tensor::randn({n}, gen) * 3.0).backward();
    sum(b * Tensor::randn({7}, gen)).backward();
    double squares = 0;
    for (const Tensor& t : {a, b})
      for (const double x : t.grad().to_vector()) squares += x * x;
    std::vector<double> norms;
    for (const int t : {1, 2, 3}) {
      set_num_threads(t);
      norms.push_back(optim::grad_norm_clip({a, b}, 1.0).norm);
    }
    set_num_threads(threads);
    BOOST_TEST(std::abs(norms[0] - std::sqrt(squares)) <= 1e-16 * static_cast<double>(n + 7) * std::sqrt(squares),
               "n " << n);
    BOOST_TEST((norms[1] == norms[0] && norms[2] == norms[0]), "n " << n << " on 2 and 3 threads");
  }
}

// step(grad_norm_clip(...).factor) updates as clip_grad_norm then step() do, bit for bit,
// for every built-in optimizer and setting that reads the gradient differently, in float32
// and float64, clipped or within the norm, and leaves the gradients unscaled.
BOOST_AUTO_TEST_CASE(a_clip_factor_given_to_step_is_clip_grad_norm_then_step_bit_for_bit) {
  using Make = std::function<std::unique_ptr<optim::Optimizer>(const optim::NamedParameters&)>;
  const std::vector<std::pair<const char*, Make>> optimizers = {
      {"SGD", [](const auto& ps) { return std::make_unique<optim::SGD>(ps, optim::SGDOptions{.lr = 0.1}); }},
      {"SGD momentum, nesterov, weight decay",
       [](const auto& ps) {
         return std::make_unique<optim::SGD>(
             ps, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true, .weight_decay = 0.01});
       }},
      {"SGD maximize, dampening",
       [](const auto& ps) {
         return std::make_unique<optim::SGD>(
             ps, optim::SGDOptions{.lr = 0.1, .momentum = 0.5, .dampening = 0.3, .maximize = true});
       }},
      {"Adam weight decay, amsgrad",
       [](const auto& ps) {
         return std::make_unique<optim::Adam>(ps, optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true});
       }},
      {"AdamW maximize", [](const auto& ps) {
         return std::make_unique<optim::AdamW>(ps, optim::AdamWOptions{.lr = 0.01, .maximize = true});
       }}};
  for (const auto& [name, make] : optimizers)
    for (const DType dtype : {DType::float32, DType::float64})
      for (const double max_norm : {1e-3, 1e3}) {  // clipped every step; never clipped
        Generator gen(7);
        const Tensor w0 = Tensor::randn({70, 300}, gen).to(dtype), b0 = Tensor::randn({70}, gen).to(dtype);
        const Tensor x = Tensor::randn({9, 300}, gen).to(dtype);
        struct Run {
          Tensor w, b;
          std::unique_ptr<optim::Optimizer> opt;
        };
        const auto start = [&] {
          Run r{w0.clone().requires_grad_(), b0.clone().requires_grad_(), nullptr};
          r.opt = make({{"w", r.w}, {"b", r.b}});
          return r;
        };
        Run clipped = start(), folded = start();
        for (int step = 0; step < 3; ++step) {
          for (Run* r : {&clipped, &folded}) {
            r->opt->zero_grad();
            sum(pow(tanh(linear(x, r->w, r->b)), 2.0)).backward();
          }
          const double norm = optim::clip_grad_norm({clipped.w, clipped.b}, max_norm);
          clipped.opt->step();
          const std::vector<double> grad_before = folded.w.grad().to_vector();
          const optim::GradNormClip clip = optim::grad_norm_clip({folded.w, folded.b}, max_norm);
          BOOST_TEST(clip.norm == norm);
          BOOST_TEST((max_norm < 1 ? clip.factor < 1.0 : clip.factor == 1.0));
          folded.opt->step(clip.factor);
          const std::string what = std::string(name) + ", " + dtype_name(dtype) + ", step " + std::to_string(step);
          BOOST_TEST((folded.w.to_vector() == clipped.w.to_vector()), what << ": w");
          BOOST_TEST((folded.b.to_vector() == clipped.b.to_vector()), what << ": b");
          BOOST_TEST((folded.w.grad().to_vector() == grad_before), what << ": the gradient is left unscaled");
        }
      }
}

// A clip's factor is in [0, 1] or NaN (a non-finite norm's, passed on); -1 would climb.
BOOST_AUTO_TEST_CASE(a_negative_or_infinite_grad_factor_is_refused) {
  Problem p = fixture_problem();
  optim::SGD sgd(p.parameters(), {.lr = 0.1});
  p.loss().backward();
  const std::vector<double> w = p.w.to_vector();
  for (const double bad : {-1.0, -1e-300, std::numeric_limits<double>::infinity()}) {
    BOOST_TEST_CONTEXT(bad) {
      check_error([&] { sgd.step(bad); }, {"SGD", "grad_factor", "finite and >= 0"});
      BOOST_CHECK_EQUAL(sgd.step_count(), 0);
      BOOST_CHECK(p.w.to_vector() == w);
    }
  }
  sgd.step(0.0);  // nothing moves, but it is a step
  BOOST_CHECK_EQUAL(sgd.step_count(), 1);
  BOOST_CHECK(p.w.to_vector() == w);
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

namespace {

// A schedule of a user's own, with and without the apply() its constructor must end with.
struct Warmup : optim::LRSchedule {
  explicit Warmup(optim::Optimizer& optimizer, bool set_rate_zero) : LRSchedule(optimizer) {
    if (set_rate_zero) apply();
  }
  double rate_from(double base, std::int64_t update) const override {
    return base * std::min(1.0, static_cast<double>(update + 1) / 100.0);
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(schedules_of_ones_own_set_rate_zero_or_say_so) {
  Problem p = fixture_problem();
  optim::SGD sgd(p.parameters(), {.lr = 1.0});
  {
    optim::LambdaLR lambda(sgd, [](std::int64_t update) { return std::min(1.0, (update + 1) / 100.0); });
    BOOST_CHECK_CLOSE(sgd.lr(), 0.01, 1e-12);  // rate(0), before the first update
    lambda.step();
    BOOST_CHECK_CLOSE(sgd.lr(), 0.02, 1e-12);
    BOOST_CHECK_CLOSE(lambda.rate(500), 1.0, 1e-12);
  }
  sgd.set_lr(1.0);
  {
    Warmup applied(sgd, true);
    BOOST_CHECK_CLOSE(sgd.lr(), 0.01, 1e-12);
    applied.step();
    BOOST_CHECK_CLOSE(sgd.lr(), 0.02, 1e-12);
  }
  sgd.set_lr(1.0);
  {
    Warmup forgot(sgd, false);
    BOOST_CHECK_EQUAL(sgd.lr(), 1.0);  // update 0 would run at the base rate: the first step() says so
    check_error([&] { forgot.step(); }, {"LRSchedule", "did not call apply()", "LambdaLR"});
  }
  check_error([&] { optim::LambdaLR(sgd, [](std::int64_t update) { return update == 0 ? std::nan("") : 1.0; }); },
              {"LRSchedule", "rate of update 0", "must be finite"});
  check_error([&] { optim::LambdaLR(sgd, nullptr); }, {"LambdaLR", "empty"});
}
