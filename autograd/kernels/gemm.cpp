#include "xgrad/autograd/kernels/gemm.hpp"

#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/kernels/onednn_matmul.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/autograd/profile.hpp"

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

// One library call's profile event (while a Profiler records): the kernels that ran, the
// shape of op(A) op(B) as m x k x n, and its 2 m n k FLOPs.
class ProductEvent {
 public:
  // `batch` products of m x k x n (the event shows one's shape, and all their work).
  ProductEvent(const char* kernels, std::size_t m, std::size_t n, std::size_t k, std::size_t batch = 1)
      : scope_(profile::Kind::product, kernels) {
    if (profile::Event* event = scope_.event()) {
      event->m = static_cast<std::int64_t>(m), event->k = static_cast<std::int64_t>(k);
      event->n = static_cast<std::int64_t>(n);
      event->flops =
          2.0 * static_cast<double>(batch) * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    }
  }
  void rename(const char* kernels) const {
    if (profile::Event* event = scope_.event()) event->name = kernels;
  }
  // The call ran no product (others take it): none of the work is its.
  void ran_nothing() const {
    if (profile::Event* event = scope_.event()) event->flops = 0;
  }

 private:
  profile::Scope scope_;
};

void blas_gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
               std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
  const ProductEvent profiled("sgemm (OpenBLAS)", m, n, k);
  cblas_sgemm(CblasRowMajor, flag(trans_a), flag(trans_b), as_int(m), as_int(n), as_int(k), alpha, a, as_int(lda), b,
              as_int(ldb), beta, c, as_int(ldc));
}

void blas_gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha, const double* a,
               std::size_t lda, const double* b, std::size_t ldb, double beta, double* c, std::size_t ldc) {
  const ProductEvent profiled("dgemm (OpenBLAS)", m, n, k);
  cblas_dgemm(CblasRowMajor, flag(trans_a), flag(trans_b), as_int(m), as_int(n), as_int(k), alpha, a, as_int(lda), b,
              as_int(ldb), beta, c, as_int(ldc));
}

// bfloat16 x bfloat16 -> float32, row-major like cblas_sgemm: exported by libdnnl and used
// by its own tests and by TensorFlow, but not declared in oneDNN 2.6's headers.
extern "C" dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t M, dnnl_dim_t N, dnnl_dim_t K,
                                               float alpha, const std::uint16_t* A, dnnl_dim_t lda,
                                               const std::uint16_t* B, dnnl_dim_t ldb, float beta, float* C,
                                               dnnl_dim_t ldc);

// oneDNN (Debian's is an OpenMP build) runs a call on omp_get_max_threads() threads of
// the calling thread: set to one for the call, so that it stays on xgrad's thread and
// libgomp never starts a team of spinning workers beside xgrad's pool.
class OneOpenMPThread {
 public:
  OneOpenMPThread() : saved_(omp_get_max_threads()) {
    if (saved_ != 1) omp_set_num_threads(1);
  }
  ~OneOpenMPThread() {
    if (saved_ != 1) omp_set_num_threads(saved_);
  }
  OneOpenMPThread(const OneOpenMPThread&) = delete;
  OneOpenMPThread& operator=(const OneOpenMPThread&) = delete;

 private:
  int saved_;
};

bool isa_includes(dnnl_cpu_isa_t isa, dnnl_cpu_isa_t part) { return (isa & part) == part; }

Bf16Path detect_bf16_path() {
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();  // honours DNNL_MAX_CPU_ISA
  return isa_includes(isa, dnnl_cpu_isa_avx512_core_bf16) ? Bf16Path::kOneDnnNative : Bf16Path::kWidened;
}

// A rows x cols block of bfloat16 (row stride ld) as dense float32: exact.
std::vector<float> widen(const bfloat16* x, std::size_t rows, std::size_t cols, std::size_t ld) {
  std::vector<float> out(rows * cols);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) out[r * cols + c] = to_float(x[r * ld + c]);
  return out;
}

// oneDNN 2.6's brgemm matmul takes only dense operands, each row stride equal to its
// row's length; a panel of a larger matrix (columns of B and C, a transposed A's rows,
// attention's blocks) falls to its gemm API, which has no AMX kernel. Where the primitive
// runs on AMX tiles, such a product runs on dense copies of its strided operands: GPT-2
// 124M's bf16 step 636 -> 558 ms with them (Xeon, medians of five). Elsewhere the gemm API
// runs strided operands about as fast as brgemm runs dense ones, and the copies only cost:
// the same step went 505 -> 515-614 ms with them on Zen 5 (AVX512_BF16).
bool& dense_copies_setting() {
  static bool on = onednn_bf16_kernel().find("amx") != std::string::npos;
  return on;
}

struct DenseCopies {
  std::vector<bfloat16> a, b;
  std::vector<float> c;
};

// rows x cols of x (row stride ld) into out, dense.
template <class T>
const T* dense_copy(const T* x, std::size_t rows, std::size_t cols, std::size_t ld, std::vector<T>& out) {
  if (ld == cols) return x;
  out.resize(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) std::copy_n(x + r * ld, cols, out.data() + r * cols);
  return out.data();
}

// The product through oneDNN's primitive on dense copies of whichever operands are strided
// (B from `weight`'s blocked copy where B is a dense part of it); false when even those
// have no brgemm kernel.
bool onednn_matmul_on_dense_copies(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
                                   const bfloat16* a, std::size_t lda, const bfloat16* b, std::size_t ldb, float beta,
                                   float* c, std::size_t ldc, const float* bias, const Bf16Weight* weight) {
  thread_local DenseCopies copies;
  const std::size_t a_cols = trans_a ? m : k, b_cols = trans_b ? k : n;
  const bfloat16* dense_a = dense_copy(a, trans_a ? k : m, a_cols, lda, copies.a);
  const bfloat16* dense_b = dense_copy(b, trans_b ? n : k, b_cols, ldb, copies.b);
  float* dense_c = c;
  if (ldc != n) {
    copies.c.resize(m * n);
    dense_c = copies.c.data();
    if (beta != 0.0f) dense_copy(static_cast<const float*>(c), m, n, ldc, copies.c);
  }
  if (!onednn_matmul(trans_a, trans_b, m, n, k, alpha, dense_a, a_cols, dense_b, b_cols, beta, dense_c, n, bias,
                     dense_b == b ? weight : nullptr))
    return false;
  if (dense_c != c)
    for (std::size_t r = 0; r < m; ++r) std::copy_n(dense_c + r * n, n, c + r * ldc);
  return true;
}

// One bfloat16 call: oneDNN's kernels where the CPU has bf16 dot products (its matmul
// primitive, or its gemm API for shapes the primitive has no brgemm kernel for),
// elsewhere OpenBLAS's sgemm on the operands widened to float32 (exact): the same inputs
// and float32 accumulation, slower.
//
// With `weight`, B lies inside the weight's rounded matrix, and where the primitive takes the
// product (directly, or on dense copies) and B is a dense part of it, the primitive reads B
// from the weight's blocked copy (onednn_matmul.hpp).
void bf16_gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const bfloat16* a,
               std::size_t lda, const bfloat16* b, std::size_t ldb, float beta, float* c, std::size_t ldc,
               const float* bias, const Bf16Weight* weight) {
  const ProductEvent profiled("bf16 matmul (oneDNN primitive)", m, n, k);
  const auto add_bias = [&] {
    if (bias)
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) c[i * ldc + j] += bias[j];
  };
  if (bf16_path() != Bf16Path::kWidened) {
    const OneOpenMPThread one_thread;
    const bool bias_in_product = alpha == 1.0f;  // oneDNN would scale it by alpha
    const float* product_bias = bias_in_product ? bias : nullptr;
    const Bf16Weight* b_weight = ldb == (trans_b ? k : n) ? weight : nullptr;  // only a dense B reads it blocked
    if (onednn_matmul(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, product_bias, b_weight) ||
        (dense_copies_setting() && onednn_matmul_on_dense_copies(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
                                                                 c, ldc, product_bias, weight))) {
      if (!bias_in_product) add_bias();
      return;
    }
    profiled.rename("bf16 gemm (oneDNN)");
    const auto dim = [](std::size_t x) { return static_cast<dnnl_dim_t>(x); };
    const dnnl_status_t status =
        dnnl_gemm_bf16bf16f32(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', dim(m), dim(n), dim(k), alpha,
                              reinterpret_cast<const std::uint16_t*>(a), dim(lda),
                              reinterpret_cast<const std::uint16_t*>(b), dim(ldb), beta, c, dim(ldc));
    XGRAD_CHECK(status == dnnl_success, "matmul (bfloat16)", "oneDNN's dnnl_gemm_bf16bf16f32 failed (status ", status,
                ") for ", m, " x ", k, " x ", n);
    add_bias();
    return;
  }
  profiled.rename("bf16 widened (OpenBLAS sgemm)");
  const std::vector<float> wide_a = trans_a ? widen(a, k, m, lda) : widen(a, m, k, lda);
  const std::vector<float> wide_b = trans_b ? widen(b, n, k, ldb) : widen(b, k, n, ldb);
  blas_gemm(trans_a, trans_b, m, n, k, alpha, wide_a.data(), std::max<std::size_t>(1, trans_a ? m : k), wide_b.data(),
            std::max<std::size_t>(1, trans_b ? k : n), beta, c, ldc);
  add_bias();
}

// Below this many multiply-adds a product is one BLAS call: waking the pool costs more.
constexpr double kParallelMultiplyAdds = 1 << 21;
// Panels are cut at multiples of this many rows or columns, whole vector registers.
constexpr std::size_t kPanelAlign = 16;
// A product worth splitting is cut in two; beyond that, into as many as keep every panel
// this many rows (or columns) wide: each panel repacks the other operand, which costs
// about 2% of a panel's time at 512 rows and 7% at 128 (Zen 5, 1 thread).
constexpr std::size_t kMinPanelExtent = 512;
// Where panels run on AMX tiles (dense_panels below) they are narrower, so that 16 threads
// share products that were two panels: columns and k as narrow as 64, whose panels each
// pack only their own part of B; rows as narrow as 128 where B (which every row panel
// packs whole) fits in half an L2 of 2 MiB. A 1024^3 product (B 2 MiB) in 64-row panels
// ran at 840 GFLOP/s on 2 threads against 1,200 in two (Xeon, AMX).
constexpr std::size_t kMinDensePanelExtent = 64;
constexpr std::size_t kMinDenseRowPanelExtent = 128;
constexpr std::size_t kDenseBBytes = std::size_t{1} << 20;
// A product's C is streamed (CStore) when larger than this, one call's C in blocks of its
// rows of at most this many bytes, each written into a buffer that stays in L2 before it
// is copied out.
constexpr std::size_t kStreamedBlockBytes = std::size_t{1} << 20;
// A call on AMX tiles this many rows of C or more, whose B is deeper than kDenseBBytes,
// runs as a chain of calls along k (below): one block of rows packs B only once anyway.
constexpr std::size_t kMinChainedRows = 128;
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

// Panels of an extent (C's rows or columns): the shape's own count, a power of two, so
// that 2, 4, 8 and 16 threads share the panels evenly.
std::size_t panel_count(std::size_t extent, double multiply_adds, std::size_t min_extent) {
  const std::size_t by_extent = std::max<std::size_t>(2, extent / min_extent);
  const auto by_work = static_cast<std::size_t>(2 * multiply_adds / kParallelMultiplyAdds);
  return std::bit_floor(std::min({by_extent, by_work, kMaxPanels}));
}

// dense_panels: the panels run where only dense operands run fast (bf16 on AMX tiles:
// strided ones are copied dense first, gemm.cpp above). There a cut whose panels are dense
// is taken over one that needs copies: along k when A is stored transposed and B is not
// (a weight gradient: both panels are row ranges), else C's rows when A is not stored
// transposed (C's and A's row panels are dense, B whole).
// A weight gradient is cut in two along k from k = 2 max(m, n) already (not 4), where each
// half is still kMinPanelExtent deep: each thread then reads the rows of dY and X it wrote
// itself. Medium's bf16 step (2,048 positions, weights 256 to 1,024 wide) ran 4.5% faster
// (Xeon, AMX); lm's (768 positions) 3% slower, its halves too shallow to pay for the sum.
// A weight gradient too shallow to cut along k is cut along C's rows even where C is wider
// than tall: its column panels would each copy their strip of C dense and back (beta 1:
// both ways) and transpose the whole of A again. GPT-2 124M's 768 x 256 x 3,072 one ran in
// 0.87-0.89 ms in 2 or 4 row panels against 1.8-2.1 ms in 16 column panels (2 threads),
// and its bf16 step 1.02-1.04x faster (two runs of five rounds, Xeon, AMX).
// Where C has few rows (up to 512 positions) and the product is large, its rows would
// feed only two threads of many: there columns are cut (C's panels copied, 1/k of the work,
// and B's where they are not its stored rows, 1/m), or k where B's panels are its stored
// rows (A's panels copied, 1/n), whenever that gives at least twice the panels. GPT-2
// 124M's step at B 4, T 64 on 16 threads: the tied head's products had run on two threads
// for 95 of 382 ms. With more rows, column panels cost on 2 threads (a 1024^3 product 8%).
Cut cut_of(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, bool dense_panels) {
  const double multiply_adds = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (multiply_adds < kParallelMultiplyAdds) return {};
  const std::size_t min_extent = dense_panels ? kMinDensePanelExtent : kMinPanelExtent;
  // Each row panel's call repacks all of B: narrow ones only where B stays in L2, or where
  // A is stored transposed and every panel's call transposes its own rows of it anyway.
  const std::size_t row_min_extent =
      dense_panels && (trans_a || k * n * sizeof(bfloat16) <= kDenseBBytes) ? kMinDenseRowPanelExtent : kMinPanelExtent;
  const bool k_panels_dense = trans_a && !trans_b, rows_dense = !trans_a && m >= 2 * kPanelAlign;
  std::size_t k_panels = std::min(kMaxKPanels, std::bit_floor(k / (2 * std::max(m, n))));
  if (dense_panels && k_panels_dense && k >= 2 * std::max(m, n) && k >= 2 * kMinPanelExtent)
    k_panels = std::max<std::size_t>(k_panels, 2);
  struct Choice {
    Cut::Axis axis;
    std::size_t extent, panels;
  } choice{};
  if (k_panels >= 2 && (!dense_panels || k_panels_dense || !rows_dense))
    choice = {Cut::kInner, k, k_panels};
  else if (m >= n || (dense_panels && (rows_dense || trans_a)))
    choice = {Cut::kRows, m, panel_count(m, multiply_adds, row_min_extent)};
  else
    choice = {Cut::kColumns, n, panel_count(n, multiply_adds, min_extent)};
  if (dense_panels && choice.axis == Cut::kRows && m <= kMinPanelExtent) {
    const std::size_t columns = panel_count(n, multiply_adds, min_extent);
    if (!trans_b && k_panels >= 2 * choice.panels && k_panels >= columns)
      choice = {Cut::kInner, k, k_panels};
    else if (columns >= 2 * choice.panels)
      choice = {Cut::kColumns, n, columns};
  }
  Cut cut{choice.axis, aligned_step(choice.extent, choice.panels)};
  cut.panels = (choice.extent + cut.step - 1) / cut.step;
  if (cut.panels == 1) cut.axis = Cut::kNone;
  return cut;
}

// Runs C = op(A) op(B) (scaled as `call` does) + bias as the pieces of `cut`: call(trans_a,
// trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc, bias) computes one piece, C = alpha
// op(A) op(B) + bias + beta C with the caller's alpha, through one library call (bias:
// the piece's columns of the row added to every row of C, or null).
//
// A large product is cut into panels that the pool's threads share. The cut depends only
// on the shapes, never on the thread count, and one thread makes the very same library
// calls as many: a kernel may sum an element differently depending on the shape of the
// call it is in (edge tiles, paths for small matrices, blocking chosen by size), so only
// the same calls give the same bits on any number of threads, on every kernel family
// (what lets data parallelism over processes with fewer threads each equal one process).
//
// When the inner dimension dominates (a weight gradient summed over every position) the
// cut is along k, each panel packing only its share of A and B, with the partial products
// added in panel order; otherwise each panel is a band of C's rows, or of its columns
// when C is wider than tall, each element of C computed whole by one call. The epilogue
// (or null) runs on each piece of C as it is finished: a panel, or a chunk of summed rows.
template <class In, class Out, class Call>
void split_product(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, const In* a,
                   std::size_t lda, const In* b, std::size_t ldb, Out beta, Out* c, std::size_t ldc, const Out* bias,
                   bool dense_panels, const BlockEpilogue* epilogue, const Call& call) {
  const Cut cut = cut_of(trans_a, trans_b, m, n, k, dense_panels);
  const auto finished = [epilogue](std::size_t row, std::size_t rows, std::size_t col, std::size_t cols) {
    if (epilogue) (*epilogue)(row, rows, col, cols);
  };
  if (cut.axis == Cut::kNone) {
    call(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc, bias);
    finished(0, m, 0, n);
    return;
  }
  const double work =
      static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / static_cast<double>(cut.panels);
  if (cut.axis == Cut::kInner) {
    const std::unique_ptr<Out[]> partial(new Out[cut.panels * m * n]);  // each panel's written whole
    parallel_for(cut.panels, work, [&](std::size_t p) {
      const std::size_t begin = p * cut.step, size = std::min(k, begin + cut.step) - begin;  // columns of op(A)
      call(trans_a, trans_b, m, n, size, trans_a ? a + begin * lda : a + begin, lda,
           trans_b ? b + begin : b + begin * ldb, ldb, Out(0), partial.get() + p * m * n, n, nullptr);
    });
    // The partial products added on the pool, rows apart, each element in panel order. A
    // block of a row's sums at a time, each panel's part added across it: loops over
    // columns, which the compiler vectorises (the panels' strided loop inside each element's
    // was 3% of medium's bf16 step).
    constexpr std::size_t kBlock = 256;
    const std::size_t rows_per_chunk = std::max<std::size_t>(1, kElementsPerChunk / n);
    parallel_for_chunks(m, rows_per_chunk, static_cast<double>(n * cut.panels),
                        [&](std::size_t first, std::size_t last) {
                          std::array<Out, kBlock> sums;
                          for (std::size_t i = first; i < last; ++i) {
                            Out* row = c + i * ldc;
                            for (std::size_t j0 = 0; j0 < n; j0 += kBlock) {
                              const std::size_t width = std::min(kBlock, n - j0);
                              for (std::size_t j = 0; j < width; ++j)
                                sums[j] = beta == Out(0) ? Out(0) : beta * row[j0 + j];
                              for (std::size_t p = 0; p < cut.panels; ++p) {
                                const Out* part = partial.get() + (p * m + i) * n + j0;
                                for (std::size_t j = 0; j < width; ++j) sums[j] += part[j];
                              }
                              if (bias)
                                for (std::size_t j = 0; j < width; ++j) row[j0 + j] = sums[j] + bias[j0 + j];
                              else
                                std::copy_n(sums.begin(), width, row + j0);
                            }
                          }
                          finished(first, last - first, 0, n);
                        });
    return;
  }
  parallel_for(cut.panels, work, [&](std::size_t p) {
    const std::size_t extent = cut.axis == Cut::kRows ? m : n;
    const std::size_t begin = p * cut.step, size = std::min(extent, begin + cut.step) - begin;
    if (cut.axis == Cut::kRows) {  // rows of op(A) and of C
      call(trans_a, trans_b, size, n, k, trans_a ? a + begin : a + begin * lda, lda, b, ldb, beta, c + begin * ldc, ldc,
           bias);
      finished(begin, size, 0, n);
    } else {  // columns of op(B) and of C
      call(trans_a, trans_b, m, size, k, a, lda, trans_b ? b + begin * ldb : b + begin, ldb, beta, c + begin, ldc,
           bias ? bias + begin : nullptr);
      finished(0, m, begin, size);
    }
  });
}

// One call of a cut product on AMX tiles, as a chain of calls along k where B's stored
// rows are k (not transposed) and more than kDenseBBytes of them: oneDNN 2.6.3's matmul
// packs B again for each block of C's rows, from L3 or memory once B outgrows the L2, and
// chained calls each pack a part that stays there. Each link is at least kMinPanelExtent
// deep: shallower ones cost more in C read and written again (GPT-2's 192 x 256 x 3,072
// weight gradient in two links of 128: 1.2x slower in the step). The first call writes
// C as the caller asked (beta, the bias), the later ones add into it (beta 1): C's
// float32 sums carry the chain. GPT-2 124M's tied head, dX = dY W over 50,257 rows of W
// in eight k panels of 6,288: 256 x 6,288 x 768 ran at 548-584 GFLOP/s in one call,
// 740-765 in chained calls of 1,048 to 1,572 (Xeon, AMX, one thread); in the step that
// product ran 1.39x faster. The chain depends on the call's shape alone.
void bf16_gemm_chained(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
                       const bfloat16* a, std::size_t lda, const bfloat16* b, std::size_t ldb, float beta, float* c,
                       std::size_t ldc, const float* bias, const Bf16Weight* weight) {
  const std::size_t b_bytes = k * n * sizeof(bfloat16);
  const std::size_t links = std::min((b_bytes + kDenseBBytes - 1) / kDenseBBytes, k / kMinPanelExtent);
  if (trans_b || m < kMinChainedRows || links < 2) {
    bf16_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias, weight);
    return;
  }
  const std::size_t step = aligned_step(k, links);
  for (std::size_t begin = 0; begin < k; begin += step) {
    const std::size_t depth = std::min(k, begin + step) - begin;  // columns of op(A), rows of B
    const bool first = begin == 0;
    bf16_gemm(trans_a, false, m, n, depth, alpha, trans_a ? a + begin * lda : a + begin, lda, b + begin * ldb, ldb,
              first ? beta : 1.0f, c, ldc, first ? bias : nullptr, nullptr);
  }
}

// rows x cols floats (dense) into `to` (row stride ldt), streamed past the caches: no line
// of `to` is read before it is written.
void copy_streamed(const float* from, std::size_t rows, std::size_t cols, float* to, std::size_t ldt) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* in = from + r * cols;
    float* out = to + r * ldt;
    std::size_t j = 0;
#if defined(__AVX512F__)
    // Streaming stores write whole aligned lines: up to the first line boundary one by one.
    for (; j < cols && reinterpret_cast<std::uintptr_t>(out + j) % 64 != 0; ++j) out[j] = in[j];
    for (; j + 16 <= cols; j += 16) _mm512_stream_ps(out + j, _mm512_loadu_ps(in + j));
#endif
    for (; j < cols; ++j) out[j] = in[j];
  }
#if defined(__AVX512F__)
  _mm_sfence();  // visible to other threads before the pool signals them
#endif
}

// One call of a product whose C is streamed (CStore::streamed, beta 0): computed into a
// buffer of the thread's that the L2 holds, then streamed into C. Written straight to C,
// each line of a C far larger than the caches is first read from memory (for ownership)
// and later written back: twice C's bytes. GPT-2 124M's weight gradients (340 MB a bf16
// step at B 4, T 64) ran 1.6x faster as products, 1.2x with the copies out, and the step
// 1.04-1.06x (Xeon, AMX, five and six rounds alternating).
void bf16_gemm_streamed(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
                        const bfloat16* a, std::size_t lda, const bfloat16* b, std::size_t ldb, float* c,
                        std::size_t ldc, const float* bias, const Bf16Weight* weight) {
  const std::size_t blocks = (m * n * sizeof(float) + kStreamedBlockBytes - 1) / kStreamedBlockBytes;
  const std::size_t step = aligned_step(m, blocks);
  thread_local std::vector<float> scratch;
  scratch.resize(std::min(m, step) * n);
  for (std::size_t begin = 0; begin < m; begin += step) {
    const std::size_t rows = std::min(m, begin + step) - begin;  // rows of op(A) and of C
    bf16_gemm_chained(trans_a, trans_b, rows, n, k, alpha, trans_a ? a + begin : a + begin * lda, lda, b, ldb, 0.0f,
                      scratch.data(), n, bias, weight);
    copy_streamed(scratch.data(), rows, n, c + begin * ldc, ldc);
  }
}

// xgrad::gemm's bf16 product, B read from `weight` where given (B inside weight->data()).
void bf16_product(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
                  const bfloat16* a, std::size_t lda, const bfloat16* b, std::size_t ldb, float beta, float* c,
                  std::size_t ldc, const float* bias, const Bf16Weight* weight, CStore store,
                  const BlockEpilogue* epilogue = nullptr) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // a sum of no terms: C = beta C (+ bias), as BLAS leaves it
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        const float kept = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
        c[i * ldc + j] = bias ? kept + bias[j] : kept;
      }
    if (epilogue) (*epilogue)(0, m, 0, n);
    return;
  }
  const bool dense_panels = bf16_path() != Bf16Path::kWidened && dense_copies_setting();
  // Only a C larger than an L2 is streamed: a smaller one (medium's, lm's weight gradients)
  // may still be in cache when the optimizer reads it (medium and lm bf16 2% slower). And
  // only a shallow product's (k up to 512), whose time goes into writing C: a deep one's
  // rows in blocks would each pack B again (GPT-2 at B 8, T 256: 2,048-deep weight
  // gradients in blocks of 64 rows, 366 GFLOP/s a thread). Within the cut, only the calls
  // that write C itself: k panels' partial products are read again at once.
  const bool streamed = dense_panels && store == CStore::streamed && beta == 0.0f && k <= kMinPanelExtent &&
                        m * n * sizeof(float) > kStreamedBlockBytes;
  const auto writes_c = [c, c_end = c + (m - 1) * ldc + n](const float* pc) {
    return std::greater_equal<const float*>()(pc, c) && std::less<const float*>()(pc, c_end);
  };
  split_product(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc, bias, dense_panels, epilogue,
                [alpha, weight, dense_panels, streamed, writes_c](bool ta, bool tb, std::size_t pm, std::size_t pn,
                                                                  std::size_t pk, const bfloat16* pa, std::size_t plda,
                                                                  const bfloat16* pb, std::size_t pldb, float pbeta,
                                                                  float* pc, std::size_t pldc, const float* pbias) {
                  if (streamed && pbeta == 0.0f && writes_c(pc))
                    bf16_gemm_streamed(ta, tb, pm, pn, pk, alpha, pa, plda, pb, pldb, pc, pldc, pbias, weight);
                  else if (dense_panels)
                    bf16_gemm_chained(ta, tb, pm, pn, pk, alpha, pa, plda, pb, pldb, pbeta, pc, pldc, pbias, weight);
                  else
                    bf16_gemm(ta, tb, pm, pn, pk, alpha, pa, plda, pb, pldb, pbeta, pc, pldc, pbias, weight);
                });
}

}  // namespace

void batched_gemm(std::size_t batch, bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
                  float alpha, const bfloat16* a, std::size_t lda, std::size_t stride_a, const bfloat16* b,
                  std::size_t ldb, std::size_t stride_b, float beta, float* c, std::size_t ldc, std::size_t stride_c) {
  if (bf16_path() == Bf16Path::kOneDnnNative && m > 0 && n > 0 && k > 0) {  // empty products: gemm's, below
    const ProductEvent profiled("bf16 batched matmul (oneDNN primitive)", m, n, k, batch);
    const OneOpenMPThread one_thread;
    if (onednn_matmul_batched(batch, trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,
                              stride_c))
      return;
    profiled.ran_nothing();
  }
  for (std::size_t i = 0; i < batch; ++i)
    bf16_product(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta, c + i * stride_c,
                 ldc, nullptr, nullptr, CStore::cached);
}

bool dense_copies_for_brgemm() { return dense_copies_setting(); }
void set_dense_copies_for_brgemm(bool on) { dense_copies_setting() = on; }

void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const bfloat16* a,
          std::size_t lda, const bfloat16* b, std::size_t ldb, float beta, float* c, std::size_t ldc, const float* bias,
          CStore store) {
  bf16_product(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias, nullptr, store);
}

void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const bfloat16* a,
          std::size_t lda, const Bf16Weight& b, WeightRead read, float beta, float* c, std::size_t ldc,
          const float* bias, const BlockEpilogue* epilogue) {
  XGRAD_CHECK((trans_b ? n : k) == b.rows() && (trans_b ? k : n) == b.cols(), "matmul (bfloat16)", "op(B) of ", k,
              " x ", n, " is not the weight of ", b.rows(), " x ", b.cols(), trans_b ? " transposed" : "");
  bf16_product(trans_a, trans_b, m, n, k, alpha, a, lda, b.data(), b.cols(), beta, c, ldc, bias,
               read == WeightRead::blocked ? &b : nullptr, CStore::cached, epilogue);
}

template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a, std::size_t lda,
          const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc, const BlockEpilogue* epilogue) {
  split_product(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc, static_cast<const T*>(nullptr), false,
                epilogue,
                [alpha](bool ta, bool tb, std::size_t pm, std::size_t pn, std::size_t pk, const T* pa, std::size_t plda,
                        const T* pb, std::size_t pldb, T pbeta, T* pc, std::size_t pldc,
                        const T*) { blas_gemm(ta, tb, pm, pn, pk, alpha, pa, plda, pb, pldb, pbeta, pc, pldc); });
}

template void gemm<float>(bool, bool, std::size_t, std::size_t, std::size_t, float, const float*, std::size_t,
                          const float*, std::size_t, float, float*, std::size_t, const BlockEpilogue*);
template void gemm<double>(bool, bool, std::size_t, std::size_t, std::size_t, double, const double*, std::size_t,
                           const double*, std::size_t, double, double*, std::size_t, const BlockEpilogue*);

Bf16Path bf16_path() {
  static const Bf16Path path = detect_bf16_path();
  return path;
}

std::string bf16_path_name() {
  const dnnl_version_t* v = dnnl_version();
  const std::string onednn =
      "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  switch (bf16_path()) {
    case Bf16Path::kOneDnnNative: {
      // The kernel oneDNN runs, not the one the CPU's flags promise.
      const std::string& kernel = onednn_bf16_kernel();
      const char* what = kernel.find("amx") != std::string::npos    ? "AMX tile products"
                         : kernel.find("bf16") != std::string::npos ? "AVX512_BF16 dot products"
                                                                    : "no bf16 kernel of its own";
      return onednn + ", " + kernel + " (" + what + ")";
    }
    case Bf16Path::kWidened:
      break;
  }
  return "OpenBLAS sgemm on the bf16 operands widened to float32 (no AVX-512 for oneDNN: slower)";
}

}  // namespace xgrad::kernels

namespace xgrad {

template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a, std::size_t lda,
          const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
  kernels::gemm<T>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, nullptr);
}

void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha, const bfloat16* a,
          std::size_t lda, const bfloat16* b, std::size_t ldb, float beta, float* c, std::size_t ldc,
          const float* bias) {
  kernels::bf16_product(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias, nullptr,
                        kernels::CStore::cached);
}

template void gemm<float>(bool, bool, std::size_t, std::size_t, std::size_t, float, const float*, std::size_t,
                          const float*, std::size_t, float, float*, std::size_t);
template void gemm<double>(bool, bool, std::size_t, std::size_t, std::size_t, double, const double*, std::size_t,
                           const double*, std::size_t, double, double*, std::size_t);

}  // namespace xgrad
