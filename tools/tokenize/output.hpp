#pragma once
// What xgrad-tokenize writes, and how it leaves nothing behind when it fails.
//
// OutputFolder: the --out folder, checked before any work (it may be made or written in,
// and holds none of the run's files and no shard), made when the writing starts, and
// left as it was found when the run fails: every file the run wrote removed, every folder
// it made too.
// ShardSeries: one split's shards in that folder, <split>_000000.bin, <split>_000001.bin,
// ..., each filled to the most tokens a shard holds before the next begins (a document
// may run on into the next shard, as in llm.c's scripts).

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "flag.hpp"
#include "xgrad/autograd/files.hpp"
#include "xgrad/text/token_shards.hpp"

namespace tools::tokenize {

class OutputFolder {
 public:
  // Checks that `path` can take the run's files: an existing folder this process may
  // write in, holding none of `names` and no *.bin file; or a path that does not exist
  // yet, below an existing folder it may write in. Makes nothing; a UsageError naming
  // `flag` and what is wrong otherwise.
  OutputFolder(Flag flag, std::string path, std::vector<std::string> names);
  // Unless kept: removes the files claimed and the folders made.
  ~OutputFolder();
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;

  // Makes the folder, with its missing parents, and makes sure a file can be made in it.
  void make();
  // The path of the file `name` in the folder, which the run now writes: it was not there
  // when the folder was checked, so it is removed if the run fails.
  std::string claim(const std::string& name);
  // The run succeeded: everything stays.
  void keep() noexcept;

  const std::string& path() const noexcept { return path_; }

 private:
  Flag flag_;
  std::string path_;
  std::vector<std::string> missing_;  // folders to make, the outermost first
  std::vector<std::string> made_, claimed_;
  std::vector<xgrad::RemovedIfKilled> unfinished_;  // the same, for a second Ctrl-C
  bool kept_ = false;
};

class ShardSeries {
 public:
  // Shards of ids below `vocabulary_size`, each of at most `shard_tokens` tokens.
  ShardSeries(OutputFolder& folder, std::string split, std::size_t vocabulary_size, std::uint64_t shard_tokens);

  // Appends tokens, committing each shard as it fills.
  void write(std::span<const xgrad::text::TokenId> tokens);
  // Commits the last shard.
  void finish();

  std::uint64_t tokens() const noexcept { return tokens_; }
  std::size_t shards() const noexcept { return shards_; }

 private:
  OutputFolder& folder_;
  std::string split_;
  std::size_t vocabulary_size_;
  std::uint64_t shard_tokens_;
  std::unique_ptr<xgrad::text::ShardWriter> current_;  // the shard being filled, if any
  std::uint64_t tokens_ = 0;
  std::size_t shards_ = 0;  // shards begun
};

// "train_000000.bin": shard `index` of a split.
std::string shard_name(const std::string& split, std::size_t index);

}  // namespace tools::tokenize
