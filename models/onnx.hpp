#pragma once
// ONNX (opset 17) of a published model's forward pass, for onnxruntime and everything
// that reads ONNX: one graph with the input "input_ids" (int64 [batch, sequence]) and the
// output "logits" (float [batch, sequence, vocab]), both axes dynamic, every position
// seeing those before it; one file runs at any batch and any length up to the model's
// max_positions() (past it, the position lookup fails in the runtime). Written through
// protobuf's generated classes of onnx.proto (Debian's libonnx-dev).
//
//   models::save_onnx(*model, "model.onnx");
//
// The weights are float32 initializers under their Hugging Face names (a float64 or
// bfloat16 model is converted), each stored once: Linear weights transposed to the
// [in, out] MatMul reads, a tied head reading the embedding's initializer (through Gemm's
// transB); Llama adds RoPE's cos and sin tables ("rope.cos", "rope.sin",
// [max_position_embeddings, head_dim / 2], computed as xgrad's rope computes them). The
// model's config.json is in the metadata ("config.json"). Only standard ops, from
// primitives where opset 17 has no fused one (GELU, RMSNorm, SiLU, RoPE, attention);
// onnxruntime's logits are within 1e-5 of xgrad's, relative to the largest |logit|
// (tests/onnx_export_test.sh).
//
// The file appears whole or not at all (autograd/files.hpp); an existing file is an Error
// unless `overwrite` is set. A model with LoRA adapters attached is refused (merge them
// first), and so is one whose weights protobuf cannot hold in one file (2 GiB; ONNX's
// external data is not written).

#include <string>

#include "xgrad/models/causal_lm.hpp"

namespace xgrad::models {

struct OnnxOptions {
  bool overwrite = false;
};

void save_onnx(const PretrainedModel& model, const std::string& path, const OnnxOptions& options = {});

}  // namespace xgrad::models
