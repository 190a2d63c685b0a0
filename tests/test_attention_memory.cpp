#define BOOST_TEST_MODULE attention_memory
// The fused attention op's memory grows with the sequence length, not its square. Its
// own process, so that the peak resident size (getrusage) belongs to this test alone.
#include "helpers.hpp"

#include <sys/resource.h>

using namespace xgrad;

namespace {

double peak_resident_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

}  // namespace

BOOST_AUTO_TEST_CASE(forward_and_backward_at_4096_positions_never_hold_a_score_map) {
  const std::size_t length = 4096, width = 64;
  Generator gen(0);
  Tensor q = Tensor::randn({1, length, width}, gen).requires_grad_();
  Tensor k = Tensor::randn({1, length, width}, gen).requires_grad_();
  Tensor v = Tensor::randn({1, length, width}, gen).requires_grad_();
  const double before = peak_resident_mib();

  Tensor out = scaled_dot_product_attention(q, k, v).output;
  sum(out * out).backward();

  const double grown = peak_resident_mib() - before;
  const double score_map = static_cast<double>(length * length * sizeof(float)) / (1024.0 * 1024.0);  // 64 MiB
  BOOST_TEST_MESSAGE("peak resident memory grew by " << grown << " MiB; one L x L float map is " << score_map
                                                     << " MiB");
  BOOST_CHECK_LT(grown, score_map / 4);
  for (const Tensor* t : {&out, &q, &k, &v}) {
    const std::vector<double> values = t == &out ? t->to_vector() : t->grad().to_vector();
    BOOST_CHECK(std::all_of(values.begin(), values.end(), [](double x) { return std::isfinite(x); }));
  }
}
