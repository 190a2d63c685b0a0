#include "xgrad/optim/adam.hpp"

#include <algorithm>
#include <cmath>

#include "xgrad/autograd/parallel.hpp"

namespace xgrad::optim {

namespace {

// Where each setting sits in a group's values, after lr and weight_decay.
enum : std::size_t { kBeta1 = 2, kBeta2, kEps, kAmsgrad, kMaximize };

std::vector<Optimizer::Setting> adam_settings(const AdamOptions& o) {
  return {{"lr", o.lr},
          {"weight_decay", o.weight_decay},
          {"beta1", o.beta1},
          {"beta2", o.beta2},
          {"eps", o.eps},
          {"amsgrad", o.amsgrad ? 1.0 : 0.0, true},
          {"maximize", o.maximize ? 1.0 : 0.0, true}};
}

AdamOptions options_of(const std::vector<double>& v) {
  return {.lr = v[Optimizer::kLr],
          .beta1 = v[kBeta1],
          .beta2 = v[kBeta2],
          .eps = v[kEps],
          .weight_decay = v[Optimizer::kWeightDecay],
          .amsgrad = v[kAmsgrad] != 0.0,
          .maximize = v[kMaximize] != 0.0};
}

std::vector<std::string> check(const std::vector<double>& v) {
  std::vector<std::string> problems;
  const double beta1 = v[kBeta1], beta2 = v[kBeta2], eps = v[kEps];
  if (!(beta1 >= 0.0 && beta1 < 1.0 && beta2 >= 0.0 && beta2 < 1.0))
    problems.push_back(str("betas (", beta1, ", ", beta2, ") must lie in [0, 1)"));
  if (!(eps >= 0.0) || !std::isfinite(eps)) problems.push_back(str("eps ", eps, " must be finite and >= 0"));
  return problems;
}

AdamOptions as_adam(const AdamWOptions& o) {
  return {.lr = o.lr,
          .beta1 = o.beta1,
          .beta2 = o.beta2,
          .eps = o.eps,
          .weight_decay = o.weight_decay,
          .amsgrad = o.amsgrad,
          .maximize = o.maximize};
}

}  // namespace

Adam::Adam(NamedParameters parameters, const AdamOptions& options)
    : Adam("Adam", {ParamGroup{std::move(parameters)}}, options, false) {}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& options)
    : Adam("Adam", std::move(groups), options, false) {}

Adam::Adam(std::string type, std::vector<ParamGroup> groups, const AdamOptions& o, bool decoupled)
    : Optimizer(std::move(type), std::move(groups), adam_settings(o), check), decoupled_(decoupled) {}

AdamW::AdamW(NamedParameters parameters, const AdamWOptions& o)
    : Adam("AdamW", {ParamGroup{std::move(parameters)}}, as_adam(o), true) {}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& o)
    : Adam("AdamW", std::move(groups), as_adam(o), true) {}

AdamOptions Adam::group_options(std::size_t group) const { return options_of(group_settings(group)); }

std::vector<std::string> Adam::buffer_names(const std::vector<double>& settings) const {
  if (settings[kAmsgrad] != 0.0) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

namespace {

constexpr std::size_t kChunk = 1 << 14;  // elements per parallel chunk
// The pool's cost estimate per element: seven arrays read or written, a square root and a
// division. At 10 a [128, 512] weight's update ran on one thread (the lm recipe's, 8% of
// its step); at 40 every tensor from 25K elements is shared.
constexpr double kWorkPerElement = 40;

struct AdamStep {
  AdamOptions o;
  bool decoupled;
  std::int64_t t;
};

template <class T>
struct AdamCoefficients {
  T sign, b1, b2, step_size, correction2_sqrt, eps, decay, shrink;
};

// Elements [begin, end): branch-free and unaliased, so that the compiler vectorises it
// (the same arithmetic per element as a scalar loop, so the same bits).
template <class T, bool kDecoupled, bool kAmsgrad>
void adam_elements(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, T* __restrict v_max,
                   std::size_t begin, std::size_t end, const AdamCoefficients<T>& c) {
  for (std::size_t i = begin; i < end; ++i) {
    T grad = c.sign * g[i];  // -g exactly, as torch's maximize
    if constexpr (kDecoupled)
      p[i] *= c.shrink;
    else
      grad += c.decay * p[i];
    m[i] += (grad - m[i]) * (T(1) - c.b1);  // torch's lerp form
    v[i] = c.b2 * v[i] + (T(1) - c.b2) * grad * grad;
    T second = v[i];
    if constexpr (kAmsgrad) second = v_max[i] = std::max(v_max[i], v[i]);
    p[i] -= c.step_size * m[i] / (std::sqrt(second) / c.correction2_sqrt + c.eps);
  }
}

template <class T>
void adam_update(T* p, const T* g, T* m, T* v, T* v_max, std::size_t n, const AdamStep& s) {
  const AdamOptions& o = s.o;
  const AdamCoefficients<T> c{o.maximize ? T(-1) : T(1),
                              static_cast<T>(o.beta1),
                              static_cast<T>(o.beta2),
                              static_cast<T>(o.lr / (1.0 - std::pow(o.beta1, static_cast<double>(s.t)))),
                              static_cast<T>(std::sqrt(1.0 - std::pow(o.beta2, static_cast<double>(s.t)))),
                              static_cast<T>(o.eps),
                              static_cast<T>(o.weight_decay),
                              static_cast<T>(1.0 - o.lr * o.weight_decay)};
  const auto run = s.decoupled ? (v_max ? adam_elements<T, true, true> : adam_elements<T, true, false>)
                               : (v_max ? adam_elements<T, false, true> : adam_elements<T, false, false>);
  parallel_for_chunks(n, kChunk, kWorkPerElement,
                      [&](std::size_t begin, std::size_t end) { run(p, g, m, v, v_max, begin, end, c); });
}

}  // namespace

void Adam::update(std::size_t i, const Tensor& grad, std::int64_t updates) {
  Tensor param = parameters()[i].second;
  const AdamStep s{options_of(settings_of(i)), decoupled_, updates};
  Tensor& m = buffer(i, "exp_avg");
  Tensor& v = buffer(i, "exp_avg_sq");
  Tensor* v_max = s.o.amsgrad ? &buffer(i, "max_exp_avg_sq") : nullptr;
  dispatch(param.dtype(), [&](auto tag) {
    using T = decltype(tag);
    adam_update(param.data<T>(), grad.data<T>(), m.data<T>(), v.data<T>(), v_max ? v_max->data<T>() : nullptr,
                param.numel(), s);
  });
}

}  // namespace xgrad::optim
