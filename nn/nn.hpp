#pragma once
// Everything in nn/ at once.

#include "nn/activation.hpp"
#include "nn/attention.hpp"
#include "nn/checkpoint.hpp"
#include "nn/embedding.hpp"
#include "nn/files.hpp"
#include "nn/gradcheck.hpp"
#include "nn/init.hpp"
#include "nn/linear.hpp"
#include "nn/loss.hpp"
#include "nn/module.hpp"
#include "nn/normalization.hpp"
#include "nn/sequential.hpp"
#include "nn/transformer.hpp"
