#include "xgrad/optim/sgd.hpp"

#include <cmath>

#include "xgrad/autograd/parallel.hpp"

namespace xgrad::optim {

SGD::SGD(NamedParameters parameters, const SGDOptions& o) : SGD({ParamGroup{std::move(parameters)}}, o) {}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& o)
    : Optimizer("SGD", std::move(groups), o.lr, o.weight_decay), options_(o) {
  XGRAD_CHECK(o.momentum >= 0.0 && std::isfinite(o.momentum), type(), "momentum ", o.momentum,
              " must be finite and >= 0");
  XGRAD_CHECK(std::isfinite(o.dampening), type(), "dampening ", o.dampening, " must be finite");
  XGRAD_CHECK(!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0), type(),
              "nesterov needs momentum > 0 and dampening 0");
}

std::vector<std::string> SGD::buffer_names() const { return {"momentum_buffer"}; }

namespace {

constexpr std::size_t kChunk = 1 << 14;  // elements per parallel chunk

// Independent elements, in fixed chunks over the thread pool.
template <class T>
void sgd_update(T* p, const T* g, T* buf, bool first, std::size_t n, const SGDOptions& o, double lr,
                double weight_decay) {
  const T decay = static_cast<T>(weight_decay), momentum = static_cast<T>(o.momentum);
  const T keep = static_cast<T>(1.0 - o.dampening), rate = static_cast<T>(lr);
  parallel_for_chunks(n, kChunk, 4.0, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      T d = g[i] + decay * p[i];
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
  bool first = false;
  Tensor* momentum = options_.momentum > 0.0 ? &buffer(i, "momentum_buffer", &first) : nullptr;
  dispatch(param.dtype(), [&](auto tag) {
    using T = decltype(tag);
    sgd_update(param.data<T>(), grad.data<T>(), momentum ? momentum->data<T>() : nullptr, first, param.numel(),
               options_, lr_of(i), weight_decay_of(i));
  });
}

}  // namespace xgrad::optim
