#include "xgrad/autograd/precision.hpp"

#include "xgrad/autograd/kernels/gemm.hpp"
#include "xgrad/autograd/kernels/onednn_matmul.hpp"
#include "xgrad/autograd/node.hpp"
#include "xgrad/autograd/tensor.hpp"

namespace xgrad {

namespace {
thread_local Precision t_precision = Precision::float32;
}

const char* precision_name(Precision precision) { return precision == Precision::bfloat16 ? "bf16" : "float32"; }

AutocastGuard::AutocastGuard(Precision precision) : previous_(t_precision) { t_precision = precision; }

AutocastGuard::~AutocastGuard() { t_precision = previous_; }

Precision autocast_precision() { return t_precision; }

std::string bf16_summary() { return kernels::bf16_path_name(); }

Bf16RoundingRefresh::Bf16RoundingRefresh(const Tensor& parameter) {
  if (!parameter.defined() || parameter.dtype() != DType::float32 || !parameter.node()->is_leaf()) return;
  const Node& node = *parameter.node();
  const std::shared_ptr<const kernels::Bf16Weight> kept = node.bf16_weight.load();
  if (!kept || kept->rows() * kept->cols() != parameter.numel() ||
      !kept->made_from(node.values<float>().data(), kept->rows(), kept->cols(),
                       node.version->load(std::memory_order_relaxed)))
    return;
  node_ = parameter.node();
  rows_ = kept->rows();
  cols_ = kept->cols();
  rounded_.reset(new bfloat16[rows_ * cols_]);  // not zeroed: the update writes every element
}

void Bf16RoundingRefresh::keep() {
  if (!rounded_) return;
  node_->bf16_weight.store(
      std::make_shared<const kernels::Bf16Weight>(std::move(rounded_), node_->values<float>().data(), rows_, cols_,
                                                  node_->version->load(std::memory_order_relaxed)));
}

}  // namespace xgrad
