#include "xgrad/text/token_loader.hpp"

#include <algorithm>
#include <bit>

#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/files.hpp"
#include "xgrad/text/detail/philox.hpp"

namespace xgrad::text {

namespace {

constexpr const char* kLoader = "token loader";

// A uniform integer in [0, n) drawn for (seed, split, step, row): Lemire's multiply and
// shift, with rejection so that no value is favoured. Each Philox block gives two tries;
// the counter's second word counts blocks (the split in its top bit).
std::uint64_t draw_below(std::uint64_t n, std::uint64_t seed, Split split, std::uint64_t step, std::uint64_t row) {
  const std::uint64_t threshold = (0 - n) % n;  // 2^64 mod n: the low products to refuse
  const std::uint32_t split_bit = split == Split::validation ? 0x80000000u : 0;
  for (std::uint32_t block = 0;; ++block) {
    const detail::PhiloxBlock bits =
        detail::philox4x32_10({static_cast<std::uint32_t>(row), split_bit | block, static_cast<std::uint32_t>(step),
                               static_cast<std::uint32_t>(step >> 32)},
                              {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
    for (int half = 0; half < 2; ++half) {
      const std::uint64_t x = bits[2 * half] | (std::uint64_t{bits[2 * half + 1]} << 32);
      const unsigned __int128 product = static_cast<unsigned __int128>(x) * n;
      if (static_cast<std::uint64_t>(product) >= threshold) return static_cast<std::uint64_t>(product >> 64);
    }
  }
}

}  // namespace

const char* split_name(Split split) noexcept { return split == Split::train ? "training" : "validation"; }

TokenLoader::TokenLoader(const ShardFiles& files, std::size_t vocabulary_size, std::size_t seq_len)
    : seq_len_(seq_len) {
  XGRAD_CHECK(!files.train.empty(), kLoader, "no training shard given");
  XGRAD_CHECK(seq_len >= 1, kLoader, "seq_len is 0: a window is seq_len + 1 tokens, seq_len at least 1");
  std::vector<std::string> paths = files.train;
  paths.insert(paths.end(), files.validation.begin(), files.validation.end());
  for (std::size_t i = 0; i < paths.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      XGRAD_CHECK(paths[i] != paths[j] && !same_file(paths[i], paths[j]), kLoader, "the shard '", paths[i], "'",
                  paths[i] == paths[j] ? "" : str(" (the file '", paths[j], "')"), " is given twice",
                  j < files.train.size() && i >= files.train.size() ? " (for training and for validation)" : "");
  shards_.reserve(paths.size());
  for (const std::string& path : paths) shards_.emplace_back(path, vocabulary_size);

  const auto whole = [&](std::size_t shard) { return Part{shard, 0, shards_[shard].size()}; };
  std::vector<Part> train, validation;
  const std::size_t train_shards = files.train.size();
  if (!files.validation.empty()) {
    for (std::size_t shard = 0; shard < shards_.size(); ++shard)
      (shard < train_shards ? train : validation).push_back(whole(shard));
  } else if (train_shards >= 2) {
    for (std::size_t shard = 0; shard + 1 < train_shards; ++shard) train.push_back(whole(shard));
    validation.push_back(whole(train_shards - 1));
  } else {
    const std::size_t size = shards_[0].size(), cut = size - size / 10;
    train.push_back({0, 0, cut});
    validation.push_back({0, cut, size});
  }
  train_ = make_split(std::move(train), Split::train);
  validation_ = make_split(std::move(validation), Split::validation);
}

std::uint64_t TokenLoader::fingerprint() const {
  std::vector<std::uint64_t> shards(shards_.size());
  for (std::size_t i = 0; i < shards_.size(); ++i) shards[i] = shards_[i].fingerprint();
  std::uint64_t h = 0;
  const auto add = [&h](std::uint64_t value) { h = (std::rotl(h, 23) ^ value) * 0x9E3779B97F4A7C15ull; };
  for (const SplitParts* split : {&train_, &validation_}) {
    add(split->parts.size());
    for (const Part& part : split->parts) {
      add(shards[part.shard]);
      add(part.begin);
      add(part.end);
    }
  }
  return h;
}

TokenLoader::SplitParts TokenLoader::make_split(std::vector<Part> parts, Split split) const {
  SplitParts made;
  made.parts = std::move(parts);
  made.starts_before = {0};
  made.windows_before = {0};
  const std::size_t width = seq_len_ + 1;
  for (const Part& part : made.parts) {
    const std::size_t length = part.end - part.begin;
    made.starts_before.push_back(made.starts_before.back() + (length >= width ? length - width + 1 : 0));
    made.windows_before.push_back(made.windows_before.back() + (length >= 1 ? (length - 1) / seq_len_ : 0));
  }
  XGRAD_CHECK(made.starts_before.back() > 0, kLoader, "the ", split_name(split), " split, ", describe(made),
              ", has no window of ", width, " tokens (seq_len ", seq_len_, " + 1) within one shard");
  return made;
}

std::string TokenLoader::describe(const SplitParts& split) const {
  std::vector<std::string> parts;
  for (const Part& part : split.parts) {
    const TokenShard& shard = shards_[part.shard];
    parts.push_back(part.begin == 0 && part.end == shard.size()
                        ? str("'", shard.path(), "' (", shard.size(), " tokens)")
                        : str("tokens ", part.begin, " to ", part.end, " of '", shard.path(), "' (",
                              part.end - part.begin, " tokens)"));
  }
  return listed(parts);  // the first ten: a corpus of many small shards would make megabytes
}

std::string TokenLoader::describe(Split split) const { return describe(parts_of(split)); }

std::uint64_t TokenLoader::tokens(Split split) const {
  std::uint64_t total = 0;
  for (const Part& part : parts_of(split).parts) total += part.end - part.begin;
  return total;
}

std::uint64_t TokenLoader::window_starts(Split split) const { return parts_of(split).starts_before.back(); }

std::size_t TokenLoader::evaluation_window_count(Split split) const { return parts_of(split).windows_before.back(); }

TokenWindows TokenLoader::windows(std::size_t rows) const {
  TokenWindows out;
  out.rows = rows;
  out.width = seq_len_ + 1;
  out.ids.resize(rows * out.width);
  return out;
}

void TokenLoader::copy_window(const Part& part, std::size_t offset, TokenWindows& out, std::size_t row) const {
  shards_[part.shard].read(part.begin + offset, std::span<std::int64_t>(out.ids).subspan(row * out.width, out.width));
}

TokenWindows TokenLoader::random_windows(Split split, std::uint64_t seed, const MicroBatch& where) const {
  XGRAD_CHECK(where.batch_rows >= 1, kLoader, "batch_rows is 0");
  XGRAD_CHECK(where.batch_rows <= UINT32_MAX, kLoader, "batch_rows is ", where.batch_rows, ": at most 2^32 - 1");
  XGRAD_CHECK(where.micro_batches >= 1 && where.batch_rows % where.micro_batches == 0, kLoader, "micro_batches is ",
              where.micro_batches, ", which does not divide batch_rows ", where.batch_rows);
  XGRAD_CHECK(where.micro < where.micro_batches, kLoader, "micro is ", where.micro, ", not below micro_batches ",
              where.micro_batches);
  const SplitParts& parts = parts_of(split);
  const std::size_t rows = where.batch_rows / where.micro_batches;
  TokenWindows out = windows(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::uint64_t start = draw_below(parts.starts_before.back(), seed, split, where.step, where.micro * rows + r);
    // The part whose starts hold it: the last whose starts_before is at most `start`.
    const auto after = std::upper_bound(parts.starts_before.begin(), parts.starts_before.end(), start);
    const std::size_t part = static_cast<std::size_t>(after - parts.starts_before.begin()) - 1;
    copy_window(parts.parts[part], start - parts.starts_before[part], out, r);
  }
  return out;
}

TokenWindows TokenLoader::evaluation_windows(Split split, std::size_t first, std::size_t count) const {
  const SplitParts& parts = parts_of(split);
  const std::size_t total = parts.windows_before.back();
  XGRAD_CHECK(first <= total && count <= total - first, kLoader, "evaluation windows ", first, " to ", first + count,
              " of the ", split_name(split), " split: it has ", total);
  TokenWindows out = windows(count);
  for (std::size_t r = 0; r < count; ++r) {
    const std::size_t window = first + r;
    const auto after = std::upper_bound(parts.windows_before.begin(), parts.windows_before.end(), window);
    const std::size_t part = static_cast<std::size_t>(after - parts.windows_before.begin()) - 1;
    copy_window(parts.parts[part], (window - parts.windows_before[part]) * seq_len_, out, r);
  }
  return out;
}

}  // namespace xgrad::text
