#pragma once
// State as named tensors: what modules and optimizers save and restore, and what a
// checkpoint holds. Kept here, below both nn/ and optim/, so a checkpoint can carry
// either without one depending on the other.

#include <map>
#include <string>

#include "xgrad/autograd/tensor.hpp"

namespace xgrad {

using StateDict = std::map<std::string, Tensor>;

class Stateful {
 public:
  virtual ~Stateful() = default;
  // The tensors themselves (not copies), by name.
  virtual StateDict state_dict() const = 0;
  // Copies values in. Implementations check everything before changing anything and
  // throw an Error naming every bad entry.
  virtual void load_state_dict(const StateDict& state, bool strict = true) = 0;
};

}  // namespace xgrad
