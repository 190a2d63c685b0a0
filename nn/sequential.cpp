#include "xgrad/nn/sequential.hpp"

namespace xgrad::nn {

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

Module& Sequential::operator[](std::size_t i) const {
  XGRAD_CHECK(i < size(), "Sequential", "index ", i, " is out of range for ", size(), " modules");
  return *named_children()[i].second;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (const auto& [name, module] : named_children()) y = module->forward(y);
  return y;
}

}  // namespace xgrad::nn
