#include "xgrad/optim/adam.hpp"

#include <algorithm>
#include <cmath>

#include "xgrad/autograd/parallel.hpp"

namespace xgrad::optim {

Adam::Adam(NamedParameters parameters, const AdamOptions& options)
    : Adam("Adam", {ParamGroup{std::move(parameters)}}, options, false) {}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& options)
    : Adam("Adam", std::move(groups), options, false) {}

Adam::Adam(std::string type, std::vector<ParamGroup> groups, const AdamOptions& o, bool decoupled)
    : Optimizer(std::move(type), std::move(groups), o.lr, o.weight_decay), options_(o), decoupled_(decoupled) {
  XGRAD_CHECK(o.beta1 >= 0.0 && o.beta1 < 1.0 && o.beta2 >= 0.0 && o.beta2 < 1.0, this->type(), "betas (", o.beta1,
              ", ", o.beta2, ") must lie in [0, 1)");
  XGRAD_CHECK(o.eps >= 0.0 && std::isfinite(o.eps), this->type(), "eps ", o.eps, " must be finite and >= 0");
}

namespace {

AdamOptions as_adam(const AdamWOptions& o) {
  return {.lr = o.lr,
          .beta1 = o.beta1,
          .beta2 = o.beta2,
          .eps = o.eps,
          .weight_decay = o.weight_decay,
          .amsgrad = o.amsgrad};
}

}  // namespace

AdamW::AdamW(NamedParameters parameters, const AdamWOptions& o)
    : Adam("AdamW", {ParamGroup{std::move(parameters)}}, as_adam(o), true) {}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& o)
    : Adam("AdamW", std::move(groups), as_adam(o), true) {}

std::vector<std::string> Adam::buffer_names() const {
  if (options_.amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

namespace {

constexpr std::size_t kChunk = 1 << 14;  // elements per parallel chunk

struct AdamStep {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;
  std::int64_t t;
};

template <class T>
struct AdamCoefficients {
  T b1, b2, step_size, correction2_sqrt, eps, decay, shrink;
};

// Elements [begin, end): branch-free and unaliased, so that the compiler vectorises it
// (the same arithmetic per element as a scalar loop, so the same bits).
template <class T, bool kDecoupled, bool kAmsgrad>
void adam_elements(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, T* __restrict v_max,
                   std::size_t begin, std::size_t end, const AdamCoefficients<T>& c) {
  for (std::size_t i = begin; i < end; ++i) {
    T grad = g[i];
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
  const AdamCoefficients<T> c{static_cast<T>(s.beta1),
                              static_cast<T>(s.beta2),
                              static_cast<T>(s.lr / (1.0 - std::pow(s.beta1, static_cast<double>(s.t)))),
                              static_cast<T>(std::sqrt(1.0 - std::pow(s.beta2, static_cast<double>(s.t)))),
                              static_cast<T>(s.eps),
                              static_cast<T>(s.weight_decay),
                              static_cast<T>(1.0 - s.lr * s.weight_decay)};
  const auto run = s.decoupled ? (v_max ? adam_elements<T, true, true> : adam_elements<T, true, false>)
                               : (v_max ? adam_elements<T, false, true> : adam_elements<T, false, false>);
  parallel_for_chunks(n, kChunk, 10.0,
                      [&](std::size_t begin, std::size_t end) { run(p, g, m, v, v_max, begin, end, c); });
}

}  // namespace

void Adam::update(std::size_t i, const Tensor& grad, std::int64_t updates) {
  Tensor param = parameters()[i].second;
  Tensor& m = buffer(i, "exp_avg");
  Tensor& v = buffer(i, "exp_avg_sq");
  Tensor* v_max = options_.amsgrad ? &buffer(i, "max_exp_avg_sq") : nullptr;
  const AdamStep s{lr_of(i), options_.beta1, options_.beta2, options_.eps, weight_decay_of(i), decoupled_, updates};
  dispatch(param.dtype(), [&](auto tag) {
    using T = decltype(tag);
    adam_update(param.data<T>(), grad.data<T>(), m.data<T>(), v.data<T>(), v_max ? v_max->data<T>() : nullptr,
                param.numel(), s);
  });
}

}  // namespace xgrad::optim
