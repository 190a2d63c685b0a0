#pragma once
// A language model's tokenizer as the tools meet it: read from the files a user names
// (--tokenizer), written beside the shards xgrad-tokenize makes, and kept inside a
// checkpoint, so that xgrad-generate decodes with the model's own and a run that mixes
// tokenizers is refused.
//
// --tokenizer takes, in the formats text/vocabulary_files.hpp reads:
//   - a folder holding GPT-2's pair, encoder.json and vocab.bpe (or Hugging Face's
//     vocab.json and merges.txt);
//   - the two files of the pair, joined by a comma: "encoder.json,vocab.bpe";
//   - a tiktoken rank file (".tiktoken"); tiktoken keeps special tokens in code, so
//     <|endoftext|> is taken to follow the ranks, as in GPT-2's.

#include <optional>
#include <string>

#include "settings.hpp"
#include "xgrad/text/tokenizer.hpp"

namespace tools {

struct NamedTokenizer {
  xgrad::text::Tokenizer tokenizer;
  std::string source;  // where it came from, as said in reports: the files read
};

// The tokenizer `spec` names (see above). Errors name `what` (the flag), the file and what
// is wrong in it.
NamedTokenizer read_tokenizer(const std::string& spec, const std::string& what);

// The names of the pair xgrad-tokenize writes in its output folder.
inline constexpr const char* kEncoderFile = "encoder.json";
inline constexpr const char* kMergesFile = "vocab.bpe";
// Writes GPT-2's pair into `folder`, each file whole or not at all.
void write_tokenizer_files(const xgrad::text::Tokenizer& tokenizer, const std::string& folder, const std::string& what);
// Whether `folder` holds a pair (either naming), for defaults and mixing checks.
bool holds_tokenizer_files(const std::string& folder);
// A UsageError naming `what` when `folder` holds one file of a pair alone, where its pair
// would be read: half a tokenizer is one lost, not none.
void refuse_half_pair(const std::string& folder, const std::string& what);

// Throws a UsageError naming `what` unless a model can be trained with the tokenizer: ids
// without gaps (a model would draw an id that is no token) and special tokens of valid
// UTF-8 (a checkpoint keeps them in JSON).
void check_trainable(const NamedTokenizer& named, const std::string& what);

// A checkpoint's entries for its tokenizer: lm.tokenizer (the identity), lm.tokenizer.source,
// lm.tokenizer.ranks (tiktoken's rank format) and lm.tokenizer.special (JSON).
void add_tokenizer_metadata(const NamedTokenizer& named, Metadata& metadata);
// The checkpoint's tokenizer; nothing for a model of bytes (the char recipe). An error
// (naming `what`, the checkpoint) when its entries are damaged or disagree with the
// identity recorded.
std::optional<NamedTokenizer> tokenizer_from_metadata(const Metadata& metadata, const std::string& what);

// "02298ee4 (data/kjv/encoder.json, data/kjv/vocab.bpe)", for messages.
std::string describe(const NamedTokenizer& named);

}  // namespace tools
