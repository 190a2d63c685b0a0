#pragma once
// parallel_for(n, work, body): body(i) for i in [0, n), spread over the machine's threads
// when there is enough of it (`work` is a rough operation count per index); small jobs
// stay on the calling thread, where starting a team would cost more than it saves.
// Each index runs on exactly one thread, so results do not depend on the thread count
// as long as body(i) writes only its own outputs.

#include <cstddef>

namespace xgrad::kernels {

template <class Body>
void parallel_for(std::size_t n, double work, Body&& body) {
  const bool worth_it = n > 1 && static_cast<double>(n) * work >= 1e6;
#pragma omp parallel for schedule(dynamic, 1) if (worth_it)
  for (std::size_t i = 0; i < n; ++i) body(i);
}

}  // namespace xgrad::kernels
