#pragma once
// The published model families (GPT-2, Llama) under Hugging Face's names, and their
// directories in and out.
#include "xgrad/models/causal_lm.hpp"
#include "xgrad/models/config.hpp"
#include "xgrad/models/gguf.hpp"
#include "xgrad/models/gpt2.hpp"
#include "xgrad/models/llama.hpp"
#include "xgrad/models/onnx.hpp"
#include "xgrad/models/pretrained.hpp"
