#include "xgrad/autograd/version.hpp"

namespace xgrad {

const char* version() { return XGRAD_VERSION; }

}  // namespace xgrad
