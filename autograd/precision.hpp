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

#include <string>

namespace xgrad {

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

}  // namespace xgrad
