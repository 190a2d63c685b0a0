#pragma once
// A language model as `xgrad-train --task lm` saved it in a checkpoint: the model (xgrad's
// GPT or a published family, LoRA adapters included) with its weights, and what its tokens
// are. xgrad-generate continues text with it; xgrad-export writes it out.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config.hpp"
#include "flag.hpp"
#include "tokenizer_files.hpp"
#include "xgrad/models/causal_lm.hpp"

namespace tools {

// What a model's tokens are: the bytes of its text's vocabulary (the char recipe), or a
// tokenizer's tokens (a model of token shards), as its checkpoint records them.
struct ModelTokens {
  std::vector<std::uint8_t> bytes;
  std::optional<NamedTokenizer> tokenizer;

  std::vector<std::int64_t> encode(const std::string& text) const;
  std::string decode(std::int64_t token) const;  // an Error for an id past size()
  std::size_t size() const;                      // the vocabulary: ids 0 .. size() - 1
  // As xgrad-train's samples begin: the end of a text, or the start of a line.
  std::string default_prompt() const;
  const char* unit() const { return tokenizer ? "tokens" : "bytes"; }
};

struct TrainedModel {
  std::unique_ptr<xgrad::models::CausalLM> model;
  ModelTokens tokens;
  Config config;  // the settings it was trained with
};

// The model in the checkpoint at `path`, named in messages as `what` (the flag that gave
// it). Every damaged or foreign checkpoint is a UsageError (one line): a model of another
// task, settings or a config.json that do not fit the tensors, a tokenizer that does not
// fit the model, values that are not finite.
TrainedModel load_trained_model(const Flag& what, const std::string& path);

}  // namespace tools
