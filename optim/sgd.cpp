#include "xgrad/optim/sgd.hpp"

#include <cmath>

#include "xgrad/autograd/parallel.hpp"

namespace xgrad::optim {

namespace {

// Where each setting sits in a group's values, after lr and weight_decay.
enum : std::size_t { kMomentum = 2, kDampening, kNesterov, kMaximize };

std::vector<Optimizer::Setting> sgd_settings(const SGDOptions& o) {
  return {{"lr", o.lr},
          {"weight_decay", o.weight_decay},
          {"momentum", o.momentum},
          {"dampening", o.dampening},
          {"nesterov", o.nesterov ? 1.0 : 0.0, true},
          {"maximize", o.maximize ? 1.0 : 0.0, true}};
}

SGDOptions options_of(const std::vector<double>& v) {
  return {.lr = v[Optimizer::kLr],
          .momentum = v[kMomentum],
          .dampening = v[kDampening],
          .nesterov = v[kNesterov] != 0.0,
          .weight_decay = v[Optimizer::kWeightDecay],
          .maximize = v[kMaximize] != 0.0};
}

std::vector<std::string> check(const std::vector<double>& v) {
  std::vector<std::string> problems;
  const double momentum = v[kMomentum], dampening = v[kDampening];
  if (!(momentum >= 0.0) || !std::isfinite(momentum))
    problems.push_back(str("momentum ", momentum, " must be finite and >= 0"));
  if (!std::isfinite(dampening)) problems.push_back(str("dampening ", dampening, " must be finite"));
  if (v[kNesterov] != 0.0 && !(momentum > 0.0 && dampening == 0.0))
    problems.push_back(
        str("nesterov needs momentum > 0 and dampening 0 (momentum ", momentum, ", dampening ", dampening, ")"));
  return problems;
}

}  // namespace

SGD::SGD(NamedParameters parameters, const SGDOptions& o) : SGD({ParamGroup{std::move(parameters)}}, o) {}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& o)
    : Optimizer("SGD", std::move(groups), sgd_settings(o), check), options_(o) {}

SGDOptions SGD::group_options(std::size_t group) const { return options_of(group_settings(group)); }

std::vector<std::string> SGD::buffer_names(const std::vector<double>&) const { return {"momentum_buffer"}; }

namespace {

constexpr std::size_t kChunk = 1 << 14;  // elements per parallel chunk

// Independent elements, in fixed chunks over the thread pool.
template <class T>
void sgd_update(T* p, const T* g, T* buf, bool first, std::size_t n, const SGDOptions& o) {
  const T sign = o.maximize ? T(-1) : T(1), decay = static_cast<T>(o.weight_decay);
  const T momentum = static_cast<T>(o.momentum), keep = static_cast<T>(1.0 - o.dampening);
  const T rate = static_cast<T>(o.lr);
  parallel_for_chunks(n, kChunk, 4.0, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      T d = sign * g[i] + decay * p[i];  // -g exactly, as torch's maximize
      if (buf) {
        buf[i] = first ? d : momentum * buf[i] + keep * d;
        d = o.nesterov ? d + momentum * buf[i] : buf[i];
      }
      p[i] -= rate * d;
    }
  });
}

}  // namespace

void SGD::update(std::size_t i, const Tensor& grad, std::int64_t) {
  Tensor param = parameters()[i].second;
  const SGDOptions o = options_of(settings_of(i));
  bool first = false;
  Tensor* momentum = o.momentum > 0.0 ? &buffer(i, "momentum_buffer", &first) : nullptr;
  dispatch(param.dtype(), [&](auto tag) {
    using T = decltype(tag);
    sgd_update(param.data<T>(), grad.data<T>(), momentum ? momentum->data<T>() : nullptr, first, param.numel(), o);
  });
}

}  // namespace xgrad::optim
