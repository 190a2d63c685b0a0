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

// Below this many multiply-adds a product is one BLAS call: waking the pool costs more.
constexpr double kParallelMultiplyAdds = 1 << 21;
// Panels are cut at multiples of this many rows or columns, whole vector registers.
constexpr std::size_t kPanelAlign = 16;
// A product worth splitting is cut in two; beyond that, into as many as keep every panel
// this many rows (or columns) wide: each panel repacks the other operand, which costs
// about 2% of a panel's time at 512 rows and 7% at 128 (Zen 5, 1 thread).
constexpr std::size_t kMinPanelExtent = 512;
// Enough panels to keep 16 threads busy on a large product, none under half the threshold.
constexpr std::size_t kMaxPanels = 16;
// A product is cut along k into at most this many panels, each with k at least 2 x max(m, n).
constexpr std::size_t kMaxKPanels = 8;

// How a product is cut into pieces, from its shape alone.
struct Cut {
  enum Axis { kNone, kRows, kColumns, kInner } axis = kNone;
  std::size_t step = 0, panels = 1;  // panels of `step` rows, columns or k, the last one shorter
};

std::size_t aligned_step(std::size_t extent, std::size_t panels) {
  return ((extent + panels - 1) / panels + kPanelAlign - 1) / kPanelAlign * kPanelAlign;
}

Cut cut_of(std::size_t m, std::size_t n, std::size_t k) {
  const double multiply_adds = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (multiply_adds < kParallelMultiplyAdds) return {};
  Cut cut;
  std::size_t extent = 0;
  if (const std::size_t k_panels = std::min(kMaxKPanels, std::bit_floor(k / (2 * std::max(m, n)))); k_panels >= 2) {
    cut.axis = Cut::kInner;
    extent = k;
    cut.step = aligned_step(k, k_panels);
  } else {
    cut.axis = m >= n ? Cut::kRows : Cut::kColumns;
    extent = std::max(m, n);
    // A power of two, so that 2, 4, 8 and 16 threads share the panels evenly.
    const std::size_t by_extent = std::max<std::size_t>(2, extent / kMinPanelExtent);
    const auto by_work = static_cast<std::size_t>(2 * multiply_adds / kParallelMultiplyAdds);
    cut.step = aligned_step(extent, std::bit_floor(std::min({by_extent, by_work, kMaxPanels})));
  }
  cut.panels = (extent + cut.step - 1) / cut.step;
  if (cut.panels == 1) cut.axis = Cut::kNone;
  return cut;
}

}  // namespace

// OpenBLAS runs each call on its caller's thread; a large product is cut into panels that
// the pool's threads share. The cut depends only on the shapes, never on the thread
// count, and one thread makes the very same BLAS calls as many: a BLAS kernel may sum an
// element differently depending on the shape of the call it is in (edge tiles, paths for
// small matrices, blocking chosen by size), so only the same calls give the same bits on
// any number of threads, on every kernel family (what lets data parallelism over
// processes with fewer threads each equal one process).
//
// When the inner dimension dominates (a weight gradient summed over every position) the
// cut is along k, each panel packing only its share of A and B, with the partial products
// added in panel order; otherwise each panel is a band of C's rows, or of its columns
// when C is wider than tall, each element of C computed whole by one BLAS call.
template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a, std::size_t lda,
          const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
  const Cut cut = cut_of(m, n, k);
  if (cut.axis == Cut::kNone) {
    blas_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const double work =
      static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / static_cast<double>(cut.panels);
  if (cut.axis == Cut::kInner) {
    std::vector<T> partial(cut.panels * m * n);
    parallel_for(cut.panels, work, [&](std::size_t p) {
      const std::size_t begin = p * cut.step, size = std::min(k, begin + cut.step) - begin;  // columns of op(A)
      blas_gemm(trans_a, trans_b, m, n, size, alpha, trans_a ? a + begin * lda : a + begin, lda,
                trans_b ? b + begin : b + begin * ldb, ldb, T(0), partial.data() + p * m * n, n);
    });
    for (std::size_t i = 0; i < m; ++i) {
      T* row = c + i * ldc;
      for (std::size_t j = 0; j < n; ++j) {
        T sum = beta == T(0) ? T(0) : beta * row[j];
        for (std::size_t p = 0; p < cut.panels; ++p) sum += partial[(p * m + i) * n + j];
        row[j] = sum;
      }
    }
    return;
  }
  parallel_for(cut.panels, work, [&](std::size_t p) {
    const std::size_t extent = cut.axis == Cut::kRows ? m : n;
    const std::size_t begin = p * cut.step, size = std::min(extent, begin + cut.step) - begin;
    if (cut.axis == Cut::kRows)  // rows of op(A) and of C
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
