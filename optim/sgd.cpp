#include "xgrad/optim/sgd.hpp"

#include <cmath>

#include "xgrad/autograd/parallel.hpp"
#include "xgrad/autograd/precision.hpp"

namespace xgrad::optim {

namespace {

// SGD's settings by name: the one place they are named (ParamGroup overrides, state
// dicts, group_setting, errors).
constexpr Setting<SGDOptions> kSettings[] = {{"lr", &SGDOptions::lr, {.min = 0}},
                                             {"weight_decay", &SGDOptions::weight_decay, {.min = 0}},
                                             {"momentum", &SGDOptions::momentum, {.min = 0}},
                                             {"dampening", &SGDOptions::dampening},
                                             {"nesterov", &SGDOptions::nesterov},
                                             {"maximize", &SGDOptions::maximize}};

// What the ranges cannot say: nesterov's needs.
std::vector<std::string> check(const SGDOptions& o) {
  if (!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0)) return {};
  return {str("nesterov needs momentum > 0 and dampening 0 (momentum ", o.momentum, ", dampening ", o.dampening, ")")};
}

}  // namespace

SGD::SGD(NamedParameters parameters, const SGDOptions& o) : SGD({ParamGroup{std::move(parameters)}}, o) {}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& o) : OptimizerWith("SGD", groups, o, kSettings, check) {}

std::vector<std::string> SGD::buffer_names(const SGDOptions&) const { return {"momentum_buffer"}; }

namespace {

template <class T>
struct SgdCoefficients {
  T sign, decay, momentum, keep, rate;
};

// Elements [begin, end) in one pass: the choices made outside the loop and the arrays
// unaliased, so that the compiler vectorises it (the same arithmetic per element as the
// scalar loop, so the same bits). kFirst: the buffer starts as the step itself.
template <class T, bool kMomentum, bool kFirst, bool kNesterov>
void sgd_elements(T* __restrict p, const T* __restrict g, T* __restrict buf, std::size_t begin, std::size_t end,
                  const SgdCoefficients<T>& c) {
  for (std::size_t i = begin; i < end; ++i) {
    T d = c.sign * g[i] + c.decay * p[i];  // -g exactly, as torch's maximize
    if constexpr (kMomentum) {
      buf[i] = kFirst ? d : c.momentum * buf[i] + c.keep * d;
      d = kNesterov ? d + c.momentum * buf[i] : buf[i];
    }
    p[i] -= c.rate * d;
  }
}

template <class T, bool kMomentum, bool kFirst>
auto sgd_kernel(bool nesterov) {
  return nesterov ? sgd_elements<T, kMomentum, kFirst, true> : sgd_elements<T, kMomentum, kFirst, false>;
}

// Independent elements, in fixed chunks over the thread pool.
template <class T>
void sgd_update(T* p, const T* g, T* buf, bool first, std::size_t n, const SGDOptions& o, double grad_factor,
                const Bf16RoundingRefresh& rounding) {
  // The gradient factor rides on the sign, as in adam.cpp.
  const SgdCoefficients<T> c{static_cast<T>(o.maximize ? -grad_factor : grad_factor), static_cast<T>(o.weight_decay),
                             static_cast<T>(o.momentum), static_cast<T>(1.0 - o.dampening), static_cast<T>(o.lr)};
  const auto run = !buf    ? sgd_kernel<T, false, false>(false)
                   : first ? sgd_kernel<T, true, true>(o.nesterov)
                           : sgd_kernel<T, true, false>(o.nesterov);
  // Five arrays read or written per element.
  parallel_for_chunks(n, kElementsPerChunk, 20.0, [&](std::size_t begin, std::size_t end) {
    run(p, g, buf, begin, end, c);
    rounding.write(p, begin, end);
  });
}

}  // namespace

void SGD::update(std::size_t i, const Tensor& grad, std::int64_t) {
  Tensor param = parameters()[i].second;
  Bf16RoundingRefresh rounding(param);
  const SGDOptions& o = group_options(group_of(i));
  bool first = false;
  Tensor* momentum = o.momentum > 0.0 ? &buffer(i, "momentum_buffer", &first) : nullptr;
  dispatch(param.dtype(), [&](auto tag) {
    using T = decltype(tag);
    sgd_update(param.data<T>(), grad.data<T>(), momentum ? momentum->data<T>() : nullptr, first, param.numel(), o,
               grad_factor(), rounding);
  });
  rounding.keep();
}

}  // namespace xgrad::optim
