#include "text.hpp"

#include <algorithm>
#include <array>

#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/files.hpp"

namespace tools {

TextCorpus::TextCorpus(const std::string& path, const std::string& what)
    : what_(what), bytes_(xgrad::read_regular_file(path, what)) {
  XGRAD_CHECK(!bytes_.empty(), what_, "is empty");
  std::array<bool, 256> seen{};
  for (const char b : bytes_) seen[static_cast<std::uint8_t>(b)] = true;
  for (int b = 0; b < 256; ++b)
    if (seen[static_cast<std::size_t>(b)]) {
      token_of_[b] = static_cast<std::int64_t>(vocabulary_.size());
      vocabulary_.push_back(static_cast<std::uint8_t>(b));
    }
  train_size_ = bytes_.size() - bytes_.size() / 10;
  fingerprint_ = xgrad::fingerprint(bytes_);
}

Batch TextCorpus::batch(Split split, std::size_t batch, std::size_t seq_len, xgrad::Generator& gen) const {
  const std::size_t begin = split_begin(split), end = split_end(split), window = seq_len + 1;
  XGRAD_CHECK(end - begin >= window, what_, "the ", split == Split::train ? "training" : "validation", " split holds ",
              end - begin, " bytes, fewer than one window of seq_len + 1 = ", window);
  const std::size_t offsets = end - begin - window + 1;
  std::vector<std::int64_t> inputs(batch * seq_len), targets(batch * seq_len);
  for (std::size_t r = 0; r < batch; ++r) {
    const auto* w = reinterpret_cast<const std::uint8_t*>(bytes_.data()) + begin + gen.below(offsets);
    for (std::size_t i = 0; i < seq_len; ++i) {
      inputs[r * seq_len + i] = token_of_[w[i]];
      targets[r * seq_len + i] = token_of_[w[i + 1]];
    }
  }
  return {xgrad::Indices(std::move(inputs), {batch, seq_len}), xgrad::Indices(std::move(targets), {batch, seq_len})};
}

std::string vocabulary_to_hex(const std::vector<std::uint8_t>& vocabulary) {
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  for (const std::uint8_t b : vocabulary) hex += {digits[b >> 4], digits[b & 15]};
  return hex;
}

std::optional<std::vector<std::uint8_t>> vocabulary_from_hex(const std::string& hex) {
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (hex.empty() || hex.size() % 2) return std::nullopt;
  std::vector<std::uint8_t> vocabulary;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int high = digit(hex[i]), low = digit(hex[i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    const auto b = static_cast<std::uint8_t>(high * 16 + low);
    if (!vocabulary.empty() && b <= vocabulary.back()) return std::nullopt;
    vocabulary.push_back(b);
  }
  return vocabulary;
}

std::vector<std::int64_t> encode(const std::vector<std::uint8_t>& vocabulary, const std::string& text) {
  std::vector<std::int64_t> tokens;
  for (const char c : text) {
    const auto b = static_cast<std::uint8_t>(c);
    const auto at = std::lower_bound(vocabulary.begin(), vocabulary.end(), b);
    XGRAD_CHECK(at != vocabulary.end() && *at == b, "encode", "the byte ", static_cast<int>(b),
                (b >= 32 && b < 127 ? xgrad::str(" ('", c, "')") : std::string()),
                " is not in the model's vocabulary of ", vocabulary.size(), " bytes");
    tokens.push_back(at - vocabulary.begin());
  }
  return tokens;
}

std::string decode(const std::vector<std::uint8_t>& vocabulary, const std::vector<std::int64_t>& tokens) {
  std::string text;
  for (const std::int64_t t : tokens) {
    XGRAD_CHECK(t >= 0 && static_cast<std::size_t>(t) < vocabulary.size(), "decode", "token ", t,
                " is outside the vocabulary of ", vocabulary.size());
    text += static_cast<char>(vocabulary[static_cast<std::size_t>(t)]);
  }
  return text;
}

}  // namespace tools
