#include "xgrad/optim/adam.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "xgrad/autograd/parallel.hpp"
#include "xgrad/autograd/precision.hpp"

namespace xgrad::optim {

namespace {

// Adam's and AdamW's settings by name: the one place they are named (ParamGroup
// overrides, state dicts, group_setting, errors).
template <bool kDecoupled>
constexpr Setting<AdamOptionsOf<kDecoupled>> kSettings[] = {
    {"lr", &AdamOptionsOf<kDecoupled>::lr, {.min = 0}},
    {"weight_decay", &AdamOptionsOf<kDecoupled>::weight_decay, {.min = 0}},
    {"beta1", &AdamOptionsOf<kDecoupled>::beta1, {.min = 0, .max = 1, .max_excluded = true}},
    {"beta2", &AdamOptionsOf<kDecoupled>::beta2, {.min = 0, .max = 1, .max_excluded = true}},
    // An element whose gradient has been 0 throughout has moments 0: eps alone keeps its
    // update from 0 / 0 = NaN, so it must not be 0 to float32's arithmetic, which flushes
    // denormals (PyTorch takes 0).
    {"eps", &AdamOptionsOf<kDecoupled>::eps, {.min = std::numeric_limits<float>::min()}},
    {"amsgrad", &AdamOptionsOf<kDecoupled>::amsgrad},
    {"maximize", &AdamOptionsOf<kDecoupled>::maximize}};

}  // namespace

template <bool kDecoupled>
AdamOf<kDecoupled>::AdamOf(NamedParameters parameters, const Options& options)
    : AdamOf({ParamGroup{std::move(parameters)}}, options) {}

template <bool kDecoupled>
AdamOf<kDecoupled>::AdamOf(std::vector<ParamGroup> groups, const Options& options)
    : OptimizerWith<Options>(kDecoupled ? "AdamW" : "Adam", groups, options, kSettings<kDecoupled>) {}

template <bool kDecoupled>
std::vector<std::string> AdamOf<kDecoupled>::buffer_names(const Options& group) const {
  if (group.amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

template <bool kDecoupled>
std::optional<std::string> AdamOf<kDecoupled>::buffer_problem(const std::string& name, const Tensor& buffer) const {
  if (name != "exp_avg_sq" && name != "max_exp_avg_sq") return std::nullopt;
  const std::vector<double> values = buffer.to_vector();
  const auto negative = std::find_if(values.begin(), values.end(), [](double v) { return v < 0; });
  if (negative == values.end()) return std::nullopt;
  // As the buffer holds it: float32's -1e-30, not the double it widens to.
  const std::string value = buffer.dtype() == DType::float32 ? str(static_cast<float>(*negative)) : str(*negative);
  return str("holds ", value, " at element ", negative - values.begin(),
             ": a second moment is a mean of squares, never negative");
}

namespace {

// The pool's cost estimate per element: seven arrays read or written, a square root and a
// division. At 10 a [128, 512] weight's update ran on one thread (the lm recipe's, 8% of
// its step); at 40 every tensor from 25K elements is shared.
constexpr double kWorkPerElement = 40;

// 1 - beta is taken in double and then rounded, as PyTorch passes it to its kernels
// (1.0f - 0.9f is 0.100000024, float(1 - 0.9) 0.1).
template <class T>
struct AdamCoefficients {
  T sign, one_minus_b1, b2, one_minus_b2, step_size, correction2_sqrt, eps, decay, shrink;
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
    m[i] += (grad - m[i]) * c.one_minus_b1;  // torch 2's lerp form (1.13: b1 m + (1 - b1) g)
    v[i] = c.b2 * v[i] + c.one_minus_b2 * grad * grad;
    T second = v[i];
    if constexpr (kAmsgrad) second = v_max[i] = std::max(v_max[i], v[i]);
    p[i] -= c.step_size * m[i] / (std::sqrt(second) / c.correction2_sqrt + c.eps);
  }
}

template <bool kDecoupled, class T>
void adam_update(T* p, const T* g, T* m, T* v, T* v_max, std::size_t n, const AdamOptionsOf<kDecoupled>& o,
                 std::int64_t t, double grad_factor, const Bf16RoundingRefresh& rounding) {
  // -factor g is -(factor g) exactly: the factor rides on the sign, as clip_grad_norm's
  // scaling then the update would compute it.
  const AdamCoefficients<T> c{static_cast<T>(o.maximize ? -grad_factor : grad_factor),
                              static_cast<T>(1.0 - o.beta1),
                              static_cast<T>(o.beta2),
                              static_cast<T>(1.0 - o.beta2),
                              static_cast<T>(o.lr / (1.0 - std::pow(o.beta1, static_cast<double>(t)))),
                              static_cast<T>(std::sqrt(1.0 - std::pow(o.beta2, static_cast<double>(t)))),
                              static_cast<T>(o.eps),
                              static_cast<T>(o.weight_decay),
                              static_cast<T>(1.0 - o.lr * o.weight_decay)};
  const auto run = v_max ? adam_elements<T, kDecoupled, true> : adam_elements<T, kDecoupled, false>;
  parallel_for_chunks(n, kElementsPerChunk, kWorkPerElement, [&](std::size_t begin, std::size_t end) {
    run(p, g, m, v, v_max, begin, end, c);
    rounding.write(p, begin, end);
  });
}

}  // namespace

template <bool kDecoupled>
void AdamOf<kDecoupled>::update(std::size_t i, const Tensor& grad, std::int64_t updates) {
  Tensor param = this->parameters()[i].second;
  Bf16RoundingRefresh rounding(param);
  const Options& o = this->group_options(this->group_of(i));
  Tensor& m = this->buffer(i, "exp_avg");
  Tensor& v = this->buffer(i, "exp_avg_sq");
  Tensor* v_max = o.amsgrad ? &this->buffer(i, "max_exp_avg_sq") : nullptr;
  dispatch(param.dtype(), [&](auto tag) {
    using T = decltype(tag);
    adam_update(param.data<T>(), grad.data<T>(), m.data<T>(), v.data<T>(), v_max ? v_max->data<T>() : nullptr,
                param.numel(), o, updates, this->grad_factor(), rounding);
  });
  rounding.keep();
}

template class AdamOf<false>;
template class AdamOf<true>;

}  // namespace xgrad::optim
