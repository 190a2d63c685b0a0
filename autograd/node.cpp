#include "xgrad/autograd/node.hpp"

#include "xgrad/autograd/detail/profile.hpp"

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

void Node::record_versions() {
  recorded_versions.clear();
  for (const NodePtr& input : inputs) recorded_versions.push_back(input ? input->version->load() : 0);
  recorded_versions.push_back(version->load());
}

void Node::check_unmodified() const {
  const auto changed = [](const Node& node, std::uint64_t recorded) { return node.version->load() != recorded; };
  for (std::size_t i = 0; i < inputs.size(); ++i)
    XGRAD_CHECK(!inputs[i] || !changed(*inputs[i], recorded_versions[i]), op, "input ", i, " (", inputs[i]->shape(),
                " ", inputs[i]->dtype(), ") was changed in place after '", op,
                "' used it (set_data, load_state_dict, Module::to, an optimizer step, or Tensor::data() called on a "
                "non-const Tensor, which counts as a write even to read: read through a const Tensor&), so its "
                "gradient cannot be computed; run the forward pass again after the change");
  XGRAD_CHECK(!changed(*this, recorded_versions.back()), op, "its output (", shape(), " ", dtype(),
              ") was changed in place after the op made it, so its gradient cannot be computed; clone() the "
              "output before writing to it");
}

Shape Node::shape() const {
  return std::visit([](const auto& a) { return to_shape(a.shape()); }, *value);
}

void refuse_array(const char* op, const Shape& shape, DType dtype, std::optional<std::size_t> bytes) {
  XGRAD_CHECK(bytes, op, "shape ", shape, " needs more than 2^64 bytes");
  check_fits_in_memory(op, *bytes, shape, " ", dtype);
  fail(op, "cannot allocate ", shape, " ", dtype);  // not reached: the check above throws
}

std::shared_ptr<Storage> make_counted_storage(Storage&& values) {
  const auto bytes = static_cast<std::int64_t>(std::visit(
      [](const auto& a) { return a.size() * sizeof(typename std::decay_t<decltype(a)>::value_type); }, values));
  const std::uint64_t session = profile::allocated(bytes);
  return std::shared_ptr<Storage>(new Storage(std::move(values)), [bytes, session](Storage* storage) {
    profile::released(bytes, session);
    delete storage;
  });
}

}  // namespace xgrad
