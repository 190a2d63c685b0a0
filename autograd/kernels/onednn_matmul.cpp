#include "xgrad/autograd/kernels/onednn_matmul.hpp"

#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "xgrad/autograd/error.hpp"

namespace xgrad::kernels {

namespace {

// Everything a primitive is made for: shapes, layouts, and the scalars it bakes in.
struct ProductKey {
  bool trans_a, trans_b;
  std::size_t m, n, k, lda, ldb, ldc;
  float alpha, beta;
  bool bias;
  bool blocked_b;  // B read from a weight's blocked copy, in the layout the primitive picks
  // Batched (batch > 0): `batch` products, 3-D operands, the i-th's stride_a, stride_b and
  // stride_c elements after the (i-1)-th's; 0: one product, 2-D operands.
  std::size_t batch = 0, stride_a = 0, stride_b = 0, stride_c = 0;

  auto tied() const {
    return std::tie(trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta, bias, blocked_b, batch, stride_a, stride_b,
                    stride_c);
  }
  bool operator<(const ProductKey& other) const { return tied() < other.tied(); }
};

// A primitive and the memory objects its calls point at the operands.
struct Product {
  dnnl::matmul primitive;
  dnnl::memory a, b, c, bias, scratchpad;
  bool optimized = false;  // a brgemm kernel (else the caller falls back)
  // With a blocked B: its layout, and the reorder that makes it from the plain B (b_plain).
  dnnl::memory::desc b_layout;
  dnnl::reorder pack;
  dnnl::memory b_plain;
};

// A products' cache grows with the shapes a program uses (a few dozen for a model); one
// that keeps changing shapes (generation over growing lengths) is cleared past this size.
constexpr std::size_t kMaxCachedProducts = 256;

dnnl::memory::desc matrix(std::size_t rows, std::size_t cols, std::size_t ld, bool transposed,
                          dnnl::memory::data_type type, std::size_t batch = 0, std::size_t batch_stride = 0) {
  using dims = dnnl::memory::dims;
  const auto d = [](std::size_t x) { return static_cast<dnnl::memory::dim>(x); };
  // op(X) is rows x cols; X stored row-major with row stride ld (X^T's when transposed).
  if (batch == 0) return {dims{d(rows), d(cols)}, type, transposed ? dims{1, d(ld)} : dims{d(ld), 1}};
  return {dims{d(batch), d(rows), d(cols)}, type,
          transposed ? dims{d(batch_stride), 1, d(ld)} : dims{d(batch_stride), d(ld), 1}};
}

Product make_product(const dnnl::engine& engine, const ProductKey& key) {
  using type = dnnl::memory::data_type;
  const auto a = matrix(key.m, key.k, key.lda, key.trans_a, type::bf16, key.batch, key.stride_a);
  const auto b_plain = matrix(key.k, key.n, key.ldb, key.trans_b, type::bf16, key.batch, key.stride_b);
  const auto b =
      key.blocked_b ? dnnl::memory::desc({static_cast<dnnl::memory::dim>(key.k), static_cast<dnnl::memory::dim>(key.n)},
                                         type::bf16, dnnl::memory::format_tag::any)
                    : b_plain;
  const auto c = matrix(key.m, key.n, key.ldc, false, type::f32, key.batch, key.stride_c);
  const auto bias = key.bias ? matrix(1, key.n, key.n, false, type::f32) : dnnl::memory::desc();
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // ours, not a buffer shared between threads
  if (key.alpha != 1.0f) attr.set_output_scales(0, {key.alpha});
  if (key.beta != 0.0f) {
    dnnl::post_ops sum;
    sum.append_sum(key.beta);
    attr.set_post_ops(sum);
  }
  Product product;
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, bias, c), attr, engine);
  } catch (const dnnl::error&) {  // no implementation at all: the gemm API takes it
    return product;
  }
  product.optimized = std::string(pd.impl_info_str()).rfind("brg", 0) == 0;
  if (!product.optimized) return product;
  product.primitive = dnnl::matmul(pd);
  product.a = dnnl::memory(a, engine, DNNL_MEMORY_NONE);
  if (key.blocked_b) {
    product.b_layout = pd.weights_desc();
    product.b_plain = dnnl::memory(b_plain, engine, DNNL_MEMORY_NONE);
    product.pack = dnnl::reorder(dnnl::reorder::primitive_desc(engine, b_plain, engine, product.b_layout));
  }
  product.b = dnnl::memory(key.blocked_b ? product.b_layout : b, engine, DNNL_MEMORY_NONE);
  product.c = dnnl::memory(c, engine, DNNL_MEMORY_NONE);
  if (key.bias) product.bias = dnnl::memory(bias, engine, DNNL_MEMORY_NONE);
  product.scratchpad = dnnl::memory(pd.scratchpad_desc(), engine);
  return product;
}

// One thread's engine, stream and primitives: nothing is shared, so no locks, and each
// thread makes the same primitive for the same shape (the same kernel: the same bits).
struct ThreadProducts {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<ProductKey, Product> products;
};

// A weight's blocked copies: a few per weight (the forward product's layout and the input
// gradient's, for each column panel); past this many, products read the plain matrix.
constexpr std::size_t kMaxBlockedCopies = 64;

}  // namespace

struct Bf16Weight::Blocked {
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  struct Copy {
    std::size_t offset;  // of op(B)'s first element in the plain matrix
    bool trans_b;
    dnnl::memory::desc layout;
    std::unique_ptr<void, Free> bytes;  // not a dnnl::memory: that would point at a thread's engine
  };
  std::mutex mutex;
  std::vector<Copy> copies;
};

Bf16Weight::Bf16Weight(const float* values, std::size_t rows, std::size_t cols, std::uint64_t version)
    : rounded_(new bfloat16[rows * cols]),  // not zeroed: written next
      rows_(rows),
      cols_(cols),
      source_(values),
      version_(version),
      blocked_(std::make_unique<Blocked>()) {
  round_to_bfloat16(values, rows, cols, cols, rounded_.get());
}

Bf16Weight::Bf16Weight(std::unique_ptr<bfloat16[]> rounded, const float* values, std::size_t rows, std::size_t cols,
                       std::uint64_t version)
    : rounded_(std::move(rounded)),
      rows_(rows),
      cols_(cols),
      source_(values),
      version_(version),
      blocked_(std::make_unique<Blocked>()) {}

Bf16Weight::~Bf16Weight() = default;

std::size_t Bf16Weight::blocked_copies() const {
  std::lock_guard lock(blocked_->mutex);
  return blocked_->copies.size();
}

namespace {

// B (inside weight's plain matrix) in the layout `product` reads it in: the weight's copy,
// made here by the first product that asks; null when the weight keeps too many copies.
const void* blocked_b(const Bf16Weight& weight, const bfloat16* b, bool trans_b, Product& product,
                      ThreadProducts& cache) {
  Bf16Weight::Blocked& blocked = weight.blocked();
  const auto offset = static_cast<std::size_t>(b - weight.data());
  std::lock_guard lock(blocked.mutex);  // a second thread asking for the copy waits for it
  for (const auto& copy : blocked.copies)
    if (copy.offset == offset && copy.trans_b == trans_b && copy.layout == product.b_layout) return copy.bytes.get();
  if (blocked.copies.size() >= kMaxBlockedCopies) return nullptr;
  constexpr std::size_t kAlign = 64;
  const std::size_t size = (product.b_layout.get_size() + kAlign - 1) / kAlign * kAlign;
  std::unique_ptr<void, Bf16Weight::Blocked::Free> bytes(std::aligned_alloc(kAlign, size));
  XGRAD_CHECK(bytes != nullptr, "matmul (bfloat16)", "out of memory for a blocked copy of a ", weight.rows(), " x ",
              weight.cols(), " weight (", size, " bytes)");
  product.b_plain.set_data_handle(const_cast<bfloat16*>(b));
  dnnl::memory copy(product.b_layout, cache.engine, bytes.get());
  product.pack.execute(cache.stream, product.b_plain, copy);
  cache.stream.wait();
  blocked.copies.push_back({offset, trans_b, product.b_layout, std::move(bytes)});
  return blocked.copies.back().bytes.get();
}

}  // namespace

const std::string& onednn_bf16_kernel() {
  static const std::string name = [] {
    const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    const ProductKey key{false, false, 256, 256, 256, 256, 256, 256, 1.0f, 0.0f, false, false};
    using type = dnnl::memory::data_type;
    const dnnl::matmul::desc desc(matrix(key.m, key.k, key.lda, false, type::bf16),
                                  matrix(key.k, key.n, key.ldb, false, type::bf16),
                                  matrix(key.m, key.n, key.ldc, false, type::f32));
    try {
      return std::string(dnnl::matmul::primitive_desc(desc, engine).impl_info_str());
    } catch (const dnnl::error&) {
      return std::string("none");
    }
  }();
  return name;
}

namespace {

// The calling thread's primitive for `key`, made on first use.
std::pair<Product&, ThreadProducts&> thread_product(const ProductKey& key) {
  thread_local ThreadProducts cache;
  auto found = cache.products.find(key);
  if (found == cache.products.end()) {
    if (cache.products.size() >= kMaxCachedProducts) cache.products.clear();
    found = cache.products.emplace(key, make_product(cache.engine, key)).first;
  }
  return {found->second, cache};
}

void execute(Product& product, ThreadProducts& cache, const ProductKey& key, const bfloat16* a, const void* b, float* c,
             const float* bias) {
  product.a.set_data_handle(const_cast<bfloat16*>(a));
  product.b.set_data_handle(const_cast<void*>(b));
  product.c.set_data_handle(c);
  if (bias) product.bias.set_data_handle(const_cast<float*>(bias));
  // Through the C API with a fixed argument array: the C++ one builds a hash map of the
  // arguments every call, a cost that shows in models of small products.
  const dnnl_exec_arg_t arguments[] = {{DNNL_ARG_SRC, product.a.get()},
                                       {DNNL_ARG_WEIGHTS, product.b.get()},
                                       {DNNL_ARG_DST, product.c.get()},
                                       {DNNL_ARG_SCRATCHPAD, product.scratchpad.get()},
                                       {DNNL_ARG_BIAS, bias ? product.bias.get() : nullptr}};
  const dnnl_status_t status =
      dnnl_primitive_execute(product.primitive.get(), cache.stream.get(), bias ? 5 : 4, arguments);
  XGRAD_CHECK(status == dnnl_success, "matmul (bfloat16)", "oneDNN's matmul primitive failed (status ", status,
              ") for ", key.m, " x ", key.k, " x ", key.n, key.batch > 0 ? " (batched)" : "");
  cache.stream.wait();
}

}  // namespace

bool onednn_matmul(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
                   const bfloat16* a, std::size_t lda, const bfloat16* b, std::size_t ldb, float beta, float* c,
                   std::size_t ldc, const float* bias, const Bf16Weight* weight) {
  const ProductKey key{trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta, bias != nullptr, weight != nullptr};
  auto [product, cache] = thread_product(key);
  if (!product.optimized) return false;
  const void* b_data = b;
  if (weight && !(b_data = blocked_b(*weight, b, trans_b, product, cache)))
    return onednn_matmul(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias);
  execute(product, cache, key, a, b_data, c, bias);
  return true;
}

bool onednn_matmul_batched(std::size_t batch, bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
                           float alpha, const bfloat16* a, std::size_t lda, std::size_t stride_a, const bfloat16* b,
                           std::size_t ldb, std::size_t stride_b, float beta, float* c, std::size_t ldc,
                           std::size_t stride_c) {
  if (batch == 0) return true;
  const ProductKey key{trans_a, trans_b, m,     n,     k,     lda,      ldb,      ldc,
                       alpha,   beta,    false, false, batch, stride_a, stride_b, stride_c};
  auto [product, cache] = thread_product(key);
  if (!product.optimized) return false;
  execute(product, cache, key, a, b, c, nullptr);
  return true;
}

}  // namespace xgrad::kernels
