#pragma once
// Denormals (subnormals): float32 values below 2^-126 in magnitude. x86 CPUs compute with
// them through a microcode assist, tens to hundreds of times slower than with normal
// numbers; a float32 model whose softmax probabilities or Adam moments underflow into them
// can run ten times slower (a GPT-2 124M step: 0.9 s -> 9 s). OpenBLAS's kernels keep
// them; oneDNN's bf16 kernels never see them.
//
// So xgrad flushes them, as torch.set_flush_denormal(true) does: on every thread that runs
// float32 work (the caller while inside a float32 op, its backward, an optimizer step or
// gradient clipping, and the pool's workers for that work) results that would be denormal
// are zero (flush-to-zero) and denormal inputs read as zero (denormals-are-zero). float64
// ops run with the caller's own setting, untouched; the caller's setting is restored when
// xgrad returns, so code outside xgrad never sees the change.
//
// Flushing changes only values below 2^-126 (about 1.2e-38): results that were denormal
// become zero, on every thread count alike, and so do results computed through one
// (float32 GELU below x = -13, where Phi(x) is denormal: values down to about 1e-37).
// set_flush_denormal(false) keeps them, for the
// whole process. On x86-64 (MXCSR's FTZ and DAZ) and AArch64 (FPCR.FZ); elsewhere a no-op.

#include <cstdint>

#include "xgrad/autograd/dtype.hpp"

namespace xgrad {

void set_flush_denormal(bool flush);  // default: true
bool flush_denormal();

// For its lifetime the calling thread flushes denormals when `dtype` is float32 and
// flushing is on; otherwise it runs in the mode it had outside every guard (float64
// untouched). Restores the mode it found. xgrad's ops, backward and Optimizer::step hold
// one; a custom op or optimizer gets it from them, and only code that runs float32 loops
// of its own outside them needs one.
class DenormalModeGuard {
 public:
  explicit DenormalModeGuard(DType dtype);
  ~DenormalModeGuard();
  DenormalModeGuard(const DenormalModeGuard&) = delete;
  DenormalModeGuard& operator=(const DenormalModeGuard&) = delete;

 private:
  std::uint64_t found_;
};

}  // namespace xgrad
