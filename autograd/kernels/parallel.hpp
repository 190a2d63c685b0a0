#pragma once
// parallel_for(n, body): body(i) for i in [0, n), spread over the machine's threads.
// Each index runs on exactly one thread, so results do not depend on the thread count
// as long as body(i) writes only its own outputs.

#include <cstddef>

namespace xgrad::kernels {

template <class Body>
void parallel_for(std::size_t n, Body&& body) {
#pragma omp parallel for schedule(dynamic, 1)
  for (std::size_t i = 0; i < n; ++i) body(i);
}

}  // namespace xgrad::kernels
