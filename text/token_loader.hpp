#pragma once
// Windows of tokens for training a language model, from token shards
// (text/token_shards.hpp). A window is seq_len + 1 consecutive tokens of one shard (the
// inputs are its first seq_len, the targets its last seq_len); no window spans two
// shards, nor the two splits.
//
// The splits. The training shards are given, and the validation shards, or none:
//   - validation shards given: they are the validation split, the training shards the
//     training split;
//   - none, two training shards or more: the last one given is the validation split;
//   - none, one training shard: its last tenth (size / 10 tokens, rounded down) is the
//     validation split, the rest the training split.
// Each split must hold one window at least (somewhere within one shard); a shard, or a
// part, shorter than a window gives none.
//
// Training windows are drawn, not read in order: a step's global batch is batch_rows
// windows; row r's start is drawn uniformly over every valid start of the split (so each
// shard weighs by its windows, about its length) by Philox4x32-10 keyed by the seed and
// counting (split, step, r). A window is a pure function of (seed, split, step, row): the
// loader keeps no state, so a resumed run, or any number of ranks, draws the same windows.
// A step's batch is cut into micro_batches micro-batches of batch_rows / micro_batches
// rows each; micro-batch m is rows [m * rows_each, (m + 1) * rows_each). (A trainer with
// R ranks, each accumulating A micro-batches, has rank r take micro-batches [r * A,
// (r + 1) * A) of R * A.)
//
// Evaluation windows are fixed: in each shard (or part) of the split, window k starts at
// k * seq_len, so consecutive windows share one token and their targets cover the
// shard's tokens after its first once each (a tail shorter than seq_len is left out).
// They are numbered across the split's shards in order; the same every call.
//
// The loader is immutable: any number of threads may draw from it at once. Ids come as
// int64, row-major [rows, seq_len + 1].
//
// Example:
//   const TokenLoader loader({.train = {"train.bin"}}, tokenizer.vocabulary_size(), 256);
//   TokenWindows batch = loader.random_windows(Split::train, seed,
//                                              {.step = step, .batch_rows = 32, .micro = 0, .micro_batches = 1});
//   // inputs: batch.ids[r * batch.width + t] for t < 256; targets: t from 1 to 256

#include <cstdint>
#include <string>
#include <vector>

#include "xgrad/text/token_shards.hpp"

namespace xgrad::text {

struct ShardFiles {
  std::vector<std::string> train;            // at least one
  std::vector<std::string> validation = {};  // none: the validation split is taken from train
};

enum class Split { train, validation };
const char* split_name(Split split) noexcept;  // "training", "validation"

// Where a micro-batch sits in a step's global batch.
struct MicroBatch {
  std::uint64_t step = 0;
  std::size_t batch_rows = 0;     // windows in the step's global batch
  std::size_t micro = 0;          // this micro-batch, below micro_batches
  std::size_t micro_batches = 1;  // dividing batch_rows
};

// rows windows of width tokens (seq_len + 1), row-major.
struct TokenWindows {
  std::size_t rows = 0, width = 0;
  std::vector<std::int64_t> ids;
};

class TokenLoader {
 public:
  // Opens every shard (each checked whole, its ids below vocabulary_size). Errors: no
  // training shard, seq_len 0, a bad shard, a split without one window (naming its shards
  // and their lengths).
  TokenLoader(const ShardFiles& files, std::size_t vocabulary_size, std::size_t seq_len);

  // The micro-batch `where` of the split's windows drawn for (seed, where.step). Errors:
  // batch_rows 0, micro_batches 0 or not dividing batch_rows, micro not below
  // micro_batches.
  TokenWindows random_windows(Split split, std::uint64_t seed, const MicroBatch& where) const;

  // The split's fixed evaluation windows [first, first + count); how many it has.
  TokenWindows evaluation_windows(Split split, std::size_t first, std::size_t count) const;
  std::size_t evaluation_window_count(Split split) const;

  std::size_t seq_len() const noexcept { return seq_len_; }
  // Tokens in the split, and the starts a window may have in it.
  std::uint64_t tokens(Split split) const;
  std::uint64_t window_starts(Split split) const;
  // The split's parts, for reports: "'a.bin' (1000 tokens), 'b.bin' (500 tokens)", or
  // "tokens 900 to 1000 of 'a.bin' (100 tokens)"; the first ten and how many more.
  std::string describe(Split split) const;
  // The shards' fingerprints (TokenShard::fingerprint) combined in order, the training
  // shards' apart from the validation shards': whether a resumed run has its data.
  std::uint64_t fingerprint() const;

 private:
  // A stretch of one shard's tokens: [begin, end).
  struct Part {
    std::size_t shard, begin, end;
  };
  struct SplitParts {
    std::vector<Part> parts;
    std::vector<std::uint64_t> starts_before;  // window starts in the parts before each, and the total last
    std::vector<std::size_t> windows_before;   // evaluation windows likewise
  };

  const SplitParts& parts_of(Split split) const { return split == Split::train ? train_ : validation_; }
  SplitParts make_split(std::vector<Part> parts, Split split) const;
  std::string describe(const SplitParts& split) const;
  TokenWindows windows(std::size_t rows) const;
  void copy_window(const Part& part, std::size_t offset, TokenWindows& out, std::size_t row) const;

  std::vector<TokenShard> shards_;
  std::size_t seq_len_;
  SplitParts train_, validation_;
};

}  // namespace xgrad::text
