#include "xgrad/optim/adam.hpp"

#include <algorithm>
#include <cmath>

#include "xgrad/autograd/parallel.hpp"

namespace xgrad::optim {

namespace {

// Adam's and AdamW's settings by name: the one place they are named (ParamGroup
// overrides, state dicts, group_setting, errors).
constexpr Setting<AdamOptions> kSettings[] = {{"lr", &AdamOptions::lr},
                                              {"weight_decay", &AdamOptions::weight_decay},
                                              {"beta1", &AdamOptions::beta1},
                                              {"beta2", &AdamOptions::beta2},
                                              {"eps", &AdamOptions::eps},
                                              {"amsgrad", &AdamOptions::amsgrad},
                                              {"maximize", &AdamOptions::maximize}};

std::vector<std::string> check(const AdamOptions& o) {
  std::vector<std::string> problems;
  if (!(o.beta1 >= 0.0 && o.beta1 < 1.0 && o.beta2 >= 0.0 && o.beta2 < 1.0))
    problems.push_back(str("betas (", o.beta1, ", ", o.beta2, ") must lie in [0, 1)"));
  if (!(o.eps >= 0.0) || !std::isfinite(o.eps)) problems.push_back(str("eps ", o.eps, " must be finite and >= 0"));
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
    : OptimizerWith(std::move(type), groups, o, kSettings, check), decoupled_(decoupled) {}

AdamW::AdamW(NamedParameters parameters, const AdamWOptions& o)
    : Adam("AdamW", {ParamGroup{std::move(parameters)}}, as_adam(o), true) {}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& o)
    : Adam("AdamW", std::move(groups), as_adam(o), true) {}

std::vector<std::string> Adam::buffer_names(const AdamOptions& group) const {
  if (group.amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

namespace {

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
  parallel_for_chunks(n, kElementsPerChunk, kWorkPerElement,
                      [&](std::size_t begin, std::size_t end) { run(p, g, m, v, v_max, begin, end, c); });
}

}  // namespace

void Adam::update(std::size_t i, const Tensor& grad, std::int64_t updates) {
  Tensor param = parameters()[i].second;
  const AdamStep s{group_options(group_of(i)), decoupled_, updates};
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
