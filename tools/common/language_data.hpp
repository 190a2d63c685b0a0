#pragma once
// What `xgrad-train --task lm` learns from, behind one interface: the bytes of a text
// (--text, the char recipe: text.hpp's TextCorpus) or token shards made by a tokenizer
// (--data and --tokenizer: text/token_loader.hpp). Every batch is a pure function of the
// run's seed and the step, so resume and data parallelism stay bitwise with either.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "settings.hpp"
#include "tasks.hpp"
#include "text.hpp"
#include "tokenizer_files.hpp"

namespace tools {

class LanguageData {
 public:
  virtual ~LanguageData() = default;

  // One past the largest token id: the model's embedding rows.
  virtual std::size_t vocabulary_size() const = 0;
  // Micro-batch `micro` of `micro_batches` (equal slices of the rows) of step `step`'s
  // training batch of `rows` windows.
  virtual Batch training_batch(std::uint64_t seed, std::int64_t step, std::size_t rows, std::size_t micro,
                               std::size_t micro_batches) const = 0;
  // The split's evaluation batches: `count` batches of `rows` windows, the same at every
  // evaluation of a run.
  virtual std::vector<Batch> evaluation_batches(Split split, std::uint64_t seed, std::size_t count,
                                                std::size_t rows) const = 0;
  // The bytes of text the tokens stand for (one a token for a text's bytes; none for a
  // special token): validation loss per byte compares models across tokenizers.
  virtual std::uint64_t text_bytes(const xgrad::Indices& tokens) const = 0;
  virtual std::string decode(const std::vector<std::int64_t>& tokens) const = 0;
  // What a sample starts from: a line break, or the end-of-text token.
  virtual std::int64_t prompt_token() const = 0;
  // A token as a label of the attention picture: short, printable.
  virtual std::string label(std::int64_t token) const = 0;
  // "bytes" or "tokens": what the model predicts, for reports.
  virtual const char* unit() const = 0;
  // The tokenizer of a model of tokens; nothing for a model of a text's bytes.
  virtual const xgrad::text::Tokenizer* tokenizer() const { return nullptr; }
  // The bytes a model of a text's bytes numbers (the text's distinct bytes, in order);
  // nothing for a model of tokens.
  virtual const std::vector<std::uint8_t>* byte_alphabet() const { return nullptr; }
  // The checkpoint's entries for it: the vocabulary of bytes, or the tokenizer whole; and
  // lm.data, the data's size and fingerprint ("4332554 bytes, fingerprint 0123456789abcdef"),
  // which a resumed run's data must match.
  virtual void add_metadata(Metadata& metadata) const = 0;
  // The bytes it keeps in memory (the text; the shards are mapped), for the memory check.
  virtual std::size_t resident_bytes() const = 0;
};

// The bytes of a text, as before: windows at offsets drawn from stream 1 of (seed, step);
// evaluation from streams 5 (training split) and 2 (validation).
std::shared_ptr<const LanguageData> make_char_data(std::shared_ptr<const TextCorpus> corpus, std::size_t seq_len);

// The token shards of a folder: files whose name holds "val" are the validation split,
// those whose name holds "train" the training split (each sorted by name; the loader's
// rule when none is a validation shard). Windows of training are text::TokenLoader's;
// evaluation takes `count * rows` of the split's fixed evaluation windows, spread evenly
// over it.
struct ShardFolder {
  std::vector<std::string> train, validation;
};
// The shards of `folder`; a UsageError naming `what` when it holds none for training, or
// a .bin that is neither.
ShardFolder find_shards(const std::string& folder, const std::string& what);
std::shared_ptr<const LanguageData> make_shard_data(const ShardFolder& shards, NamedTokenizer tokenizer,
                                                    std::size_t seq_len);

}  // namespace tools
