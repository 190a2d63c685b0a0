#pragma once
// Mixed precision, as torch.autocast("cpu", dtype=torch.bfloat16): while an
// AutocastGuard(Precision::bfloat16) lives, on the thread that made it, the matrix
// products of float32 tensors (matmul, linear) round their operands to bfloat16 and
// accumulate in float32: products about twice float32's rate on CPUs with bf16 dot
// products (AVX512_BF16, AMX; a whole step gains less). Their outputs, every other op, parameters, gradients and
// optimizer state stay float32; a product's backward runs in the precision of its forward, whenever it runs. float64
// tensors, and everything outside a guard, are untouched, bit for bit.
//
//   {
//     xgrad::AutocastGuard bf16(xgrad::Precision::bfloat16);
//     loss = cross_entropy(model.forward(x), y);
//   }
//   loss.backward();  // the products' gradients in bf16 too
//
// bf16 keeps 8 significant bits (a relative rounding error up to 2^-8 per operand); the
// sums stay float32. bf16_summary() says which kernels run the products.

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>

#include "xgrad/autograd/bfloat16.hpp"

namespace xgrad {

class Tensor;
struct Node;

enum class Precision { float32, bfloat16 };

const char* precision_name(Precision precision);  // "float32", "bf16"

class AutocastGuard {
 public:
  explicit AutocastGuard(Precision precision);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  Precision previous_;
};

// The calling thread's precision for float32 products: float32 outside every guard.
Precision autocast_precision();

// What runs bf16 products on this CPU: oneDNN's version and the kernel its matmul runs,
// e.g. "oneDNN 2.6.3, brg:avx512_core_amx_bf16 (AMX tile products)" or
// "oneDNN 2.6.3, brg:avx512_core_bf16 (AVX512_BF16 dot products)"; on CPUs without AVX-512, OpenBLAS's sgemm on the
// rounded operands (the same numerics, slower). oneDNN's DNNL_MAX_CPU_ISA caps the choice.
std::string bf16_summary();

// For optimizers: a parameter's bf16 rounding remade in the pass that updates its values.
// A float32 parameter read by bf16 products keeps the rounding of its values until they
// change; without this its next product rounds the new values in a pass of its own (for
// GPT-2 124M, 500 MB read again every step). Made before the update, while the parameter
// still keeps the rounding of its current values, it takes the rounding of each stretch of
// new values as the update writes it (while it is in cache), and keep() makes it the
// parameter's. Otherwise (not float32, not a leaf, not read in bf16 since its last change)
// it is inactive, and write and keep do nothing.
//
//   Bf16RoundingRefresh rounding(param);
//   float* p = param.data<float>();  // after the refresh is made
//   parallel_for_chunks(n, kElementsPerChunk, 20.0, [&](std::size_t begin, std::size_t end) {
//     for (std::size_t i = begin; i < end; ++i) p[i] -= lr * g[i];
//     rounding.write(p, begin, end);
//   });
//   rounding.keep();
class Bf16RoundingRefresh {
 public:
  explicit Bf16RoundingRefresh(const Tensor& parameter);
  Bf16RoundingRefresh(const Bf16RoundingRefresh&) = delete;
  Bf16RoundingRefresh& operator=(const Bf16RoundingRefresh&) = delete;

  bool active() const { return rounded_ != nullptr; }
  // Rounds the parameter's new values [begin, end) (values: its data); from any thread,
  // for disjoint stretches. Every value is to be written before keep().
  template <class T>
  void write(const T* values, std::size_t begin, std::size_t end) const {
    if constexpr (std::is_same_v<T, float>)
      if (rounded_) to_bfloat16_n(values + begin, end - begin, rounded_.get() + begin, Bf16Store::streamed);
  }
  // After the update: the rounding becomes the parameter's kept rounding of its values as
  // they now are. Not called (an exception during the update), the next product rounds.
  void keep();

 private:
  std::shared_ptr<Node> node_;
  std::size_t rows_ = 0, cols_ = 0;
  std::unique_ptr<bfloat16[]> rounded_;
};

}  // namespace xgrad
