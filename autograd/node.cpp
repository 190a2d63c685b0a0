#include "xgrad/autograd/node.hpp"

namespace xgrad {

Node::~Node() {
  // Freeing a long chain recursively would overflow the stack; unlink it iteratively:
  // a node we hold the last reference to gives up its inputs before it dies.
  std::vector<NodePtr> pending = std::move(inputs);
  while (!pending.empty()) {
    NodePtr node = std::move(pending.back());
    pending.pop_back();
    if (node && node.use_count() == 1) {
      for (NodePtr& input : node->inputs) pending.push_back(std::move(input));
      node->inputs.clear();
    }
  }
}

Shape Node::shape() const {
  return std::visit([](const auto& a) { return to_shape(a.shape()); }, *value);
}

}  // namespace xgrad
