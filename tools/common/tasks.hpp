#pragma once
// The toy sequence tasks. Tokens are 0 .. vocab-1; every row has seq_len positions and a
// target per position (kIgnore where there is nothing to predict).
//   copy     target = input
//   reverse  target = input reversed
//   sort     target = input sorted ascending
//   add      input = digits of a then digits of b (base vocab, least significant first,
//            seq_len / 2 digits each); target i = digit i of a + b (one more digit than
//            a and b), kIgnore past it

#include <cstdint>
#include <string>

#include "xgrad/autograd/random.hpp"
#include "xgrad/autograd/tensor.hpp"

namespace tools {

constexpr std::int64_t kIgnore = -100;

struct Batch {
  xgrad::Indices inputs;   // [n, seq_len]
  xgrad::Indices targets;  // [n, seq_len]
};

Batch make_batch(const std::string& task, std::size_t n, std::size_t seq_len, std::size_t vocab, xgrad::Generator& gen);

// Slice `part` of `parts` equal slices of the batch's rows (parts must divide them).
Batch slice_rows(const Batch& batch, std::size_t part, std::size_t parts);

// A generator for stream `stream` at `step` of a run with `seed`: every batch and every
// dropout mask is a pure function of (seed, stream, step), so a resumed run draws
// exactly what an uninterrupted one would.
xgrad::Generator stream_generator(std::uint64_t seed, std::uint64_t stream, std::uint64_t step);

}  // namespace tools
