#pragma once
// Sequential: calls its modules in order, each on the previous one's output. Its
// children are named "0", "1", ... as in PyTorch.

#include "xgrad/nn/module.hpp"

namespace xgrad::nn {

class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);

  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    return register_module(str(size()), std::move(module));
  }
  std::size_t size() const { return named_children().size(); }
  Module& operator[](std::size_t i) const;

  Tensor forward(const Tensor& x) override;
};

}  // namespace xgrad::nn
