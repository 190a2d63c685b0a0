#include "xgrad/autograd/precision.hpp"

#include "xgrad/autograd/kernels/gemm.hpp"

namespace xgrad {

namespace {
thread_local Precision t_precision = Precision::float32;
}

const char* precision_name(Precision precision) { return precision == Precision::bfloat16 ? "bf16" : "float32"; }

AutocastGuard::AutocastGuard(Precision precision) : previous_(t_precision) { t_precision = precision; }

AutocastGuard::~AutocastGuard() { t_precision = previous_; }

Precision autocast_precision() { return t_precision; }

std::string bf16_summary() { return kernels::bf16_path_name(); }

}  // namespace xgrad
