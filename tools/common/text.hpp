#pragma once
// A text file as a character-level (byte-level) language-modelling corpus, for
// `xgrad-train --task lm`. The file is read into memory once, so that a file changed or
// cut short while a run goes on changes nothing (the memory check counts it). The
// vocabulary is the set of distinct bytes of the file, sorted; token i is the i-th of them. The first 90% of the file
// is the training split, the last 10% the validation split; a window never crosses from one into the other.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tasks.hpp"
#include "xgrad/autograd/random.hpp"

namespace tools {

enum class Split { train, validation };

// Text to token ids of `vocabulary` (an Error naming the first byte outside it), and back.
std::vector<std::int64_t> encode(const std::vector<std::uint8_t>& vocabulary, const std::string& text);
std::string decode(const std::vector<std::uint8_t>& vocabulary, const std::vector<std::int64_t>& tokens);

class TextCorpus {
 public:
  // An Error starting with `what` (the flag and the file: "--text kjv.txt") when unusable.
  TextCorpus(const std::string& path, const std::string& what);
  TextCorpus(const TextCorpus&) = delete;
  TextCorpus& operator=(const TextCorpus&) = delete;

  const std::vector<std::uint8_t>& vocabulary() const { return vocabulary_; }
  std::size_t size() const { return bytes_.size(); }
  // xgrad::fingerprint of the bytes (autograd/files.hpp): whether a resumed run has its text.
  std::uint64_t fingerprint() const { return fingerprint_; }
  std::size_t split_begin(Split split) const { return split == Split::train ? 0 : train_size_; }
  std::size_t split_end(Split split) const { return split == Split::train ? train_size_ : bytes_.size(); }

  // `batch` windows of seq_len + 1 bytes at offsets drawn from gen inside the split:
  // inputs are their first seq_len tokens, targets the last seq_len. An Error when the
  // split is shorter than one window.
  Batch batch(Split split, std::size_t batch, std::size_t seq_len, xgrad::Generator& gen) const;
  // Token ids back to text.
  std::string decode(const std::vector<std::int64_t>& tokens) const { return tools::decode(vocabulary_, tokens); }

 private:
  std::string what_;
  std::string bytes_;  // the whole file, read once: a file changed during the run does not change it
  std::size_t train_size_ = 0;
  std::uint64_t fingerprint_ = 0;
  std::vector<std::uint8_t> vocabulary_;
  std::int64_t token_of_[256] = {};
};

// A vocabulary (sorted distinct bytes) as checkpoint text, two hex digits per byte, and
// back: nothing when the text is damaged (not hex, or bytes not strictly ascending).
std::string vocabulary_to_hex(const std::vector<std::uint8_t>& vocabulary);
std::optional<std::vector<std::uint8_t>> vocabulary_from_hex(const std::string& hex);

}  // namespace tools
