#pragma once
// The whole public API of xgrad: #include <xgrad/xgrad.hpp>.
//   tensors and ops (autograd), gradcheck, random generators, custom ops, recomputation,
//   the thread pool and BLAS report, layers and modules (nn), checkpoints, optimizers and
//   schedules (optim), tokenizers (text), GPT-2 and Llama with Hugging Face's files (models).
// xtensor interop stays apart (<xgrad/autograd/xtensor.hpp>): it pulls in xtensor.

#include "xgrad/autograd/blas.hpp"
#include "xgrad/autograd/denormals.hpp"
#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/files.hpp"
#include "xgrad/autograd/function.hpp"
#include "xgrad/autograd/gradcheck.hpp"
#include "xgrad/autograd/ops.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/autograd/precision.hpp"
#include "xgrad/autograd/random.hpp"
#include "xgrad/autograd/recompute.hpp"
#include "xgrad/autograd/state.hpp"
#include "xgrad/autograd/tensor.hpp"
#include "xgrad/autograd/version.hpp"
#include "xgrad/models/models.hpp"
#include "xgrad/nn/nn.hpp"
#include "xgrad/optim/optim.hpp"
#include "xgrad/text/text.hpp"
