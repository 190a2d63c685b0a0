#include "language_data.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <string_view>

#include "xgrad/autograd/error.hpp"
#include "xgrad/text/token_loader.hpp"

namespace tools {

using xgrad::str;
namespace text = xgrad::text;

namespace {

std::string fingerprint_text(std::uint64_t fingerprint) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fingerprint));
  return str("fingerprint ", hex);
}

class CharData : public LanguageData {
 public:
  CharData(std::shared_ptr<const TextCorpus> corpus, std::size_t seq_len)
      : corpus_(std::move(corpus)), seq_len_(seq_len) {}

  std::size_t vocabulary_size() const override { return corpus_->vocabulary().size(); }
  const std::vector<std::uint8_t>* byte_alphabet() const override { return &corpus_->vocabulary(); }

  Batch training_batch(std::uint64_t seed, std::int64_t step, std::size_t rows, std::size_t micro,
                       std::size_t micro_batches) const override {
    xgrad::Generator data = stream_generator(seed, 1, static_cast<std::uint64_t>(step));
    return slice_rows(corpus_->batch(Split::train, rows, seq_len_, data), micro, micro_batches);
  }

  std::vector<Batch> evaluation_batches(Split split, std::uint64_t seed, std::size_t count,
                                        std::size_t rows) const override {
    xgrad::Generator gen = stream_generator(seed, split == Split::train ? 5 : 2, 0);
    std::vector<Batch> batches;
    for (std::size_t b = 0; b < count; ++b) batches.push_back(corpus_->batch(split, rows, seq_len_, gen));
    return batches;
  }

  std::uint64_t text_bytes(const xgrad::Indices& tokens) const override { return tokens.values.size(); }
  std::string decode(const std::vector<std::int64_t>& tokens) const override { return corpus_->decode(tokens); }

  // A newline (the start of a line of the text) when the text has one.
  std::int64_t prompt_token() const override {
    const auto& v = corpus_->vocabulary();
    const auto at = std::lower_bound(v.begin(), v.end(), '\n');
    return at != v.end() && *at == '\n' ? at - v.begin() : 0;
  }

  std::string label(std::int64_t token) const override {
    const std::uint8_t b = corpus_->vocabulary()[static_cast<std::size_t>(token)];
    if (b == '\n') return "$";
    if (b == ' ') return "_";
    if (b < 32 || b >= 127) return "?";
    return std::string(1, static_cast<char>(b));
  }

  const char* unit() const override { return "bytes"; }
  void add_metadata(Metadata& metadata) const override {
    metadata["lm.vocabulary"] = vocabulary_to_hex(corpus_->vocabulary());
    metadata["lm.data"] = str(corpus_->size(), " bytes, ", fingerprint_text(corpus_->fingerprint()));
  }
  std::size_t resident_bytes() const override { return corpus_->size(); }

 private:
  std::shared_ptr<const TextCorpus> corpus_;
  std::size_t seq_len_;
};

// Windows of the loader as a batch: inputs the first seq_len tokens, targets the last.
Batch to_batch(const text::TokenWindows& windows) {
  const std::size_t seq_len = windows.width - 1;
  std::vector<std::int64_t> inputs(windows.rows * seq_len), targets(windows.rows * seq_len);
  for (std::size_t r = 0; r < windows.rows; ++r) {
    const auto row = windows.ids.begin() + static_cast<std::ptrdiff_t>(r * windows.width);
    std::copy(row, row + static_cast<std::ptrdiff_t>(seq_len),
              inputs.begin() + static_cast<std::ptrdiff_t>(r * seq_len));
    std::copy(row + 1, row + static_cast<std::ptrdiff_t>(windows.width),
              targets.begin() + static_cast<std::ptrdiff_t>(r * seq_len));
  }
  return {xgrad::Indices(std::move(inputs), {windows.rows, seq_len}),
          xgrad::Indices(std::move(targets), {windows.rows, seq_len})};
}

class ShardData : public LanguageData {
 public:
  ShardData(const ShardFolder& shards, NamedTokenizer tokenizer, std::size_t seq_len)
      : tokenizer_(std::move(tokenizer)),
        loader_({shards.train, shards.validation}, tokenizer_.tokenizer.vocabulary_size(), seq_len),
        record_(str(loader_.tokens(text::Split::train), " training and ", loader_.tokens(text::Split::validation),
                    " validation tokens, ", fingerprint_text(loader_.fingerprint()))) {}

  std::size_t vocabulary_size() const override { return tokenizer_.tokenizer.vocabulary_size(); }

  Batch training_batch(std::uint64_t seed, std::int64_t step, std::size_t rows, std::size_t micro,
                       std::size_t micro_batches) const override {
    return to_batch(loader_.random_windows(text::Split::train, seed,
                                           {.step = static_cast<std::uint64_t>(step),
                                            .batch_rows = rows,
                                            .micro = micro,
                                            .micro_batches = micro_batches}));
  }

  // Windows k * available / wanted for k below wanted: spread over the whole split
  // (repeated, evenly, when the split has fewer).
  std::vector<Batch> evaluation_batches(Split split, std::uint64_t seed, std::size_t count,
                                        std::size_t rows) const override {
    (void)seed;  // fixed windows
    const text::Split which = split == Split::train ? text::Split::train : text::Split::validation;
    const std::size_t available = loader_.evaluation_window_count(which), wanted = count * rows;
    std::vector<Batch> batches;
    for (std::size_t b = 0; b < count; ++b) {
      text::TokenWindows windows{rows, loader_.seq_len() + 1, {}};
      for (std::size_t r = 0; r < rows; ++r) {
        const std::size_t k = b * rows + r;
        const text::TokenWindows one = loader_.evaluation_windows(which, k * available / wanted, 1);
        windows.ids.insert(windows.ids.end(), one.ids.begin(), one.ids.end());
      }
      batches.push_back(to_batch(windows));
    }
    return batches;
  }

  // A special token (<|endoftext|> between documents) is no text: 0 bytes.
  std::uint64_t text_bytes(const xgrad::Indices& tokens) const override {
    std::uint64_t bytes = 0;
    for (const std::int64_t id : tokens.values)
      if (static_cast<std::size_t>(id) < tokenizer_.tokenizer.rank_count())
        bytes += tokenizer_.tokenizer.token_bytes(static_cast<text::TokenId>(id)).size();
    return bytes;
  }

  std::string decode(const std::vector<std::int64_t>& tokens) const override {
    std::vector<text::TokenId> ids;
    for (const std::int64_t t : tokens) ids.push_back(static_cast<text::TokenId>(t));
    return tokenizer_.tokenizer.decode(ids);
  }

  // GPT-2's samples start from the end of a text; a tokenizer without it from a line break.
  std::int64_t prompt_token() const override {
    if (const auto end = tokenizer_.tokenizer.find_special("<|endoftext|>")) return *end;
    return tokenizer_.tokenizer.find_token("\n").value_or(0);
  }

  std::string label(std::int64_t token) const override {
    std::string shown;
    for (const char c : tokenizer_.tokenizer.token_bytes(static_cast<text::TokenId>(token))) {
      const auto b = static_cast<unsigned char>(c);
      shown += b == '\n' ? '$' : b == ' ' ? '_' : b < 32 || b >= 127 ? '?' : c;
    }
    return shown.size() > 8 ? shown.substr(0, 7) + "~" : shown;
  }

  const char* unit() const override { return "tokens"; }
  const xgrad::text::Tokenizer* tokenizer() const override { return &tokenizer_.tokenizer; }
  void add_metadata(Metadata& metadata) const override {
    add_tokenizer_metadata(tokenizer_, metadata);
    metadata["lm.data"] = record_;
  }
  // The shards are mapped: pages of the file cache, shared by the machine's ranks and
  // given back under pressure, not memory of the process.
  std::size_t resident_bytes() const override { return 0; }

 private:
  NamedTokenizer tokenizer_;
  text::TokenLoader loader_;
  std::string record_;  // lm.data, made once: the shards are read whole for it
};

// Whether `split` ("train", "val") is a word of a shard's name, as llm.c names them
// ("tiny_shakespeare_val.bin", "fineweb_train_000001.bin"): words are cut at anything
// but letters and digits.
bool names_split(const std::string& name, const std::string& split) {
  const std::string stem = name.substr(0, name.size() - 4);  // without ".bin"
  std::size_t begin = 0;
  while (begin < stem.size()) {
    std::size_t end = begin;
    while (end < stem.size() && std::isalnum(static_cast<unsigned char>(stem[end]))) ++end;
    if (stem.compare(begin, end - begin, split) == 0 && end - begin == split.size()) return true;
    begin = end + 1;
  }
  return false;
}

// Names in the order a reader counts them: runs of digits compared as numbers
// ("train_2" before "train_10", "train_999999" before "train_1000000", past llm.c's six
// digits), everything else byte by byte.
bool counted_before(const std::string& a, const std::string& b) {
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      const std::size_t a_end = a.find_first_not_of("0123456789", i), b_end = b.find_first_not_of("0123456789", j);
      const std::string_view x = std::string_view(a).substr(i, a_end - i), y = std::string_view(b).substr(j, b_end - j);
      const std::string_view x_value = x.substr(std::min(x.find_first_not_of('0'), x.size() - 1)),
                             y_value = y.substr(std::min(y.find_first_not_of('0'), y.size() - 1));
      if (x_value.size() != y_value.size()) return x_value.size() < y_value.size();
      if (x_value != y_value) return x_value < y_value;
      i += x.size();
      j += y.size();
    } else {
      if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
      ++i;
      ++j;
    }
  }
  if (a.size() - i != b.size() - j) return a.size() - i < b.size() - j;
  return a < b;  // the same numbers written with other zeros: still one order
}

}  // namespace

std::shared_ptr<const LanguageData> make_char_data(std::shared_ptr<const TextCorpus> corpus, std::size_t seq_len) {
  return std::make_shared<const CharData>(std::move(corpus), seq_len);
}

ShardFolder find_shards(const std::string& folder, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(folder, error))
    throw UsageError(str(what, ": not a folder (a folder of token shards, as xgrad-tokenize writes)"));
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, error))
    if (entry.path().extension() == ".bin") names.push_back(entry.path().filename().string());
  if (error) throw UsageError(str(what, ": cannot list it (", error.message(), ")"));
  std::sort(names.begin(), names.end(), counted_before);
  ShardFolder shards;
  for (const std::string& name : names) {
    const std::string path = (fs::path(folder) / name).string();
    if (names_split(name, "val"))
      shards.validation.push_back(path);
    else if (names_split(name, "train"))
      shards.train.push_back(path);
    else
      throw UsageError(str(what, ": '", name, "' is neither a training shard (a name with the word \"train\") nor a ",
                           "validation one (\"val\")"));
  }
  if (shards.train.empty())
    throw UsageError(str(what, ": holds no training shard (a .bin file with the word \"train\" in its name)"));
  return shards;
}

std::shared_ptr<const LanguageData> make_shard_data(const ShardFolder& shards, NamedTokenizer tokenizer,
                                                    std::size_t seq_len) {
  return std::make_shared<const ShardData>(shards, std::move(tokenizer), seq_len);
}

}  // namespace tools
