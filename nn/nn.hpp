#pragma once
// Everything in nn/ at once.

#include "xgrad/nn/activation.hpp"
#include "xgrad/nn/attention.hpp"
#include "xgrad/nn/checkpoint.hpp"
#include "xgrad/nn/embedding.hpp"
#include "xgrad/nn/gradcheck.hpp"
#include "xgrad/nn/init.hpp"
#include "xgrad/nn/linear.hpp"
#include "xgrad/nn/lora.hpp"
#include "xgrad/nn/loss.hpp"
#include "xgrad/nn/module.hpp"
#include "xgrad/nn/normalization.hpp"
#include "xgrad/nn/profiler.hpp"
#include "xgrad/nn/recompute.hpp"
#include "xgrad/nn/sequential.hpp"
#include "xgrad/nn/transformer.hpp"
