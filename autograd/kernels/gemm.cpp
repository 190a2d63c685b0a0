#include "xgrad/autograd/kernels/gemm.hpp"

#include <cblas.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <vector>

#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/parallel.hpp"

namespace xgrad::kernels {

namespace {

CBLAS_TRANSPOSE flag(bool transposed) { return transposed ? CblasTrans : CblasNoTrans; }
// The BLAS takes sizes as blasint (32 bits in Debian's OpenBLAS): a larger one is an
// Error, never a silently truncated product.
blasint as_int(std::size_t v) {
  XGRAD_CHECK(v <= static_cast<std::size_t>(std::numeric_limits<blasint>::max()), "matrix product",
              "a matrix size or row stride of ", v, " is beyond what the BLAS takes (", sizeof(blasint) * 8,
              "-bit sizes)");
  return static_cast<blasint>(v);
}

void blas_gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
               std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
  cblas_sgemm(CblasRowMajor, flag(trans_a), flag(trans_b), as_int(m), as_int(n), as_int(k), alpha, a, as_int(lda), b,
              as_int(ldb), beta, c, as_int(ldc));
}

void blas_gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha, const double* a,
               std::size_t lda, const double* b, std::size_t ldb, double beta, double* c, std::size_t ldc) {
  cblas_dgemm(CblasRowMajor, flag(trans_a), flag(trans_b), as_int(m), as_int(n), as_int(k), alpha, a, as_int(lda), b,
              as_int(ldb), beta, c, as_int(ldc));
}

// Below this many multiply-adds a product stays on one thread: waking the pool costs more.
constexpr double kParallelMultiplyAdds = 1 << 21;
// Panels are cut at multiples of this many rows or columns, whole vector registers.
constexpr std::size_t kPanelAlign = 16;
// A product is cut along k into at most this many panels, each with k at least 2 x max(m, n).
constexpr std::size_t kMaxKPanels = 8;

}  // namespace

// OpenBLAS runs each call on its caller's thread; a large product is cut into panels that
// the pool's threads share. When the inner dimension dominates (a weight gradient summed
// over every position) the cut is along k, each panel packing only its share of A and B,
// with the partial products added in panel order; otherwise each thread takes a panel of
// C's rows, or of its columns when C is wider than tall, and each element of C is computed
// whole by one BLAS call. The k cut depends only on the shapes, never on the thread
// count, so that a product gives the same bits on any number of threads (what makes data
// parallelism over processes with fewer threads each equal to one process).
template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a, std::size_t lda,
          const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
  const double multiply_adds = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const std::size_t k_panels =
      multiply_adds < kParallelMultiplyAdds ? 1 : std::min(kMaxKPanels, std::bit_floor(k / (2 * std::max(m, n))));
  if (k_panels >= 2) {
    const std::size_t step = (k / k_panels + kPanelAlign - 1) / kPanelAlign * kPanelAlign;
    const std::size_t panels = (k + step - 1) / step;
    std::vector<T> partial(panels * m * n);
    parallel_for(panels, multiply_adds / static_cast<double>(panels), [&](std::size_t p) {
      const std::size_t begin = p * step, size = std::min(k, begin + step) - begin;  // columns of op(A), rows of op(B)
      blas_gemm(trans_a, trans_b, m, n, size, alpha, trans_a ? a + begin * lda : a + begin, lda,
                trans_b ? b + begin : b + begin * ldb, ldb, T(0), partial.data() + p * m * n, n);
    });
    for (std::size_t i = 0; i < m; ++i) {
      T* row = c + i * ldc;
      for (std::size_t j = 0; j < n; ++j) {
        T sum = beta == T(0) ? T(0) : beta * row[j];
        for (std::size_t p = 0; p < panels; ++p) sum += partial[(p * m + i) * n + j];
        row[j] = sum;
      }
    }
    return;
  }
  const auto threads = static_cast<std::size_t>(num_threads());
  const bool split_rows = m >= n;
  const std::size_t extent = split_rows ? m : n;
  const std::size_t panel = (extent + threads - 1) / threads;
  const std::size_t step = (panel + kPanelAlign - 1) / kPanelAlign * kPanelAlign;
  if (threads == 1 || multiply_adds < kParallelMultiplyAdds || step >= extent) {
    blas_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const std::size_t panels = (extent + step - 1) / step;
  parallel_for(panels, multiply_adds / static_cast<double>(panels), [&](std::size_t p) {
    const std::size_t begin = p * step, size = std::min(extent, begin + step) - begin;
    if (split_rows)  // rows of op(A) and of C
      blas_gemm(trans_a, trans_b, size, n, k, alpha, trans_a ? a + begin : a + begin * lda, lda, b, ldb, beta,
                c + begin * ldc, ldc);
    else  // columns of op(B) and of C
      blas_gemm(trans_a, trans_b, m, size, k, alpha, a, lda, trans_b ? b + begin * ldb : b + begin, ldb, beta,
                c + begin, ldc);
  });
}

template void gemm<float>(bool, bool, std::size_t, std::size_t, std::size_t, float, const float*, std::size_t,
                          const float*, std::size_t, float, float*, std::size_t);
template void gemm<double>(bool, bool, std::size_t, std::size_t, std::size_t, double, const double*, std::size_t,
                           const double*, std::size_t, double, double*, std::size_t);

}  // namespace xgrad::kernels
