#include "tasks.hpp"

#include <algorithm>
#include <stdexcept>

#include "cli.hpp"

namespace tools {

Batch make_batch(const std::string& task, std::size_t n, std::size_t seq_len, std::size_t vocab,
                 xgrad::Generator& gen) {
  std::vector<std::int64_t> x(n * seq_len), y(n * seq_len);
  for (auto& token : x) token = static_cast<std::int64_t>(gen.below(vocab));
  for (std::size_t r = 0; r < n; ++r) {
    const auto in = x.begin() + static_cast<std::ptrdiff_t>(r * seq_len);
    const auto out = y.begin() + static_cast<std::ptrdiff_t>(r * seq_len);
    if (task == "copy") {
      std::copy(in, in + static_cast<std::ptrdiff_t>(seq_len), out);
    } else if (task == "reverse") {
      std::reverse_copy(in, in + static_cast<std::ptrdiff_t>(seq_len), out);
    } else if (task == "sort") {
      std::partial_sort_copy(in, in + static_cast<std::ptrdiff_t>(seq_len), out,
                             out + static_cast<std::ptrdiff_t>(seq_len));
    } else if (task == "add") {
      const std::size_t digits = seq_len / 2;
      if (seq_len % 2) in[static_cast<std::ptrdiff_t>(seq_len - 1)] = 0;  // an odd last position is padding
      std::fill(out, out + static_cast<std::ptrdiff_t>(seq_len), kIgnore);
      std::int64_t carry = 0;
      for (std::size_t i = 0; i < digits; ++i) {
        const std::int64_t s = in[static_cast<std::ptrdiff_t>(i)] + in[static_cast<std::ptrdiff_t>(digits + i)] + carry;
        out[static_cast<std::ptrdiff_t>(i)] = s % static_cast<std::int64_t>(vocab);
        carry = s / static_cast<std::int64_t>(vocab);
      }
      out[static_cast<std::ptrdiff_t>(digits)] = carry;
    } else {
      throw UsageError("no such toy task: " + task);
    }
  }
  return {xgrad::Indices(std::move(x), {n, seq_len}), xgrad::Indices(std::move(y), {n, seq_len})};
}

Batch slice_rows(const Batch& batch, std::size_t part, std::size_t parts) {
  if (parts == 1) return batch;
  const std::size_t rows = batch.inputs.shape[0], length = batch.inputs.shape[1], each = rows / parts;
  const auto rows_of = [&](const xgrad::Indices& all) {
    const auto begin = all.values.begin() + static_cast<std::ptrdiff_t>(part * each * length);
    return xgrad::Indices(std::vector<std::int64_t>(begin, begin + static_cast<std::ptrdiff_t>(each * length)),
                          {each, length});
  };
  return {rows_of(batch.inputs), rows_of(batch.targets)};
}

xgrad::Generator stream_generator(std::uint64_t seed, std::uint64_t stream, std::uint64_t step) {
  // splitmix64 over the three numbers: well spread seeds for neighbouring steps.
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ULL + stream * 0xbf58476d1ce4e5b9ULL + step * 0x94d049bb133111ebULL;
  for (int round = 0; round < 2; ++round) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
  }
  return xgrad::Generator(x);
}

}  // namespace tools
