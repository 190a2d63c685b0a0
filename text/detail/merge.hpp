#pragma once
// Byte-level BPE on one piece, as tiktoken merges: the piece starts as its bytes; while
// two adjacent parts together make a token, the pair whose token has the lowest rank
// (the leftmost of equals) becomes one part. Two ways to the same parts:
//   byte_pair_merge_scan  tiktoken's: a scan for the lowest rank per merge, O(n^2); the
//                         fastest on the short pieces text is made of;
//   byte_pair_merge_heap  a heap of candidate pairs over a linked list, O(n log n): a
//                         long piece (5,000 spaces, a long run of letters) stays linear-ish.
// byte_pair_merge picks one by length. Each leaves the parts' starts in scratch.starts,
// followed by the piece's length. `rank_of(bytes)` gives a byte string's rank, or kNoRank
// when it is no token. encode_piece gives a piece's ids. Internal to the text layer (and
// its tests, which hold the two to the same parts).

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

namespace xgrad::text::detail {

inline constexpr std::uint32_t kNoRank = UINT32_MAX;
// Pieces longer than this go to the heap.
inline constexpr std::size_t kScanLimit = 128;

// Kept between pieces, so that encoding allocates only for a piece longer than any before.
struct MergeScratch {
  std::vector<std::uint32_t> starts, ranks, next, prev;
  struct Candidate {
    std::uint32_t rank, start, end;  // the pair of parts covering [start, end)
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : start > other.start;
    }
  };
  std::vector<Candidate> heap;
};

template <class RankOf>
void byte_pair_merge_scan(std::string_view piece, const RankOf& rank_of, MergeScratch& scratch) {
  const auto n = static_cast<std::uint32_t>(piece.size());
  auto& starts = scratch.starts;
  auto& ranks = scratch.ranks;  // ranks[i]: the rank of parts i and i + 1 together
  starts.resize(n + 1);
  for (std::uint32_t i = 0; i <= n; ++i) starts[i] = i;
  // The rank of parts i and i + 1 together, when there are `parts` parts.
  const auto pair_rank = [&](std::size_t i, std::size_t parts) {
    return i + 2 <= parts ? rank_of(piece.substr(starts[i], starts[i + 2] - starts[i])) : kNoRank;
  };
  std::size_t parts = n;
  ranks.resize(n);
  for (std::size_t i = 0; i < parts; ++i) ranks[i] = pair_rank(i, parts);
  while (parts > 1) {
    std::size_t best = 0;
    for (std::size_t i = 1; i + 1 < parts; ++i)
      if (ranks[i] < ranks[best]) best = i;
    if (ranks[best] == kNoRank) break;
    starts.erase(starts.begin() + static_cast<std::ptrdiff_t>(best + 1));
    ranks.erase(ranks.begin() + static_cast<std::ptrdiff_t>(best + 1));
    --parts;
    ranks[best] = pair_rank(best, parts);
    if (best > 0) ranks[best - 1] = pair_rank(best - 1, parts);
  }
}

template <class RankOf>
void byte_pair_merge_heap(std::string_view piece, const RankOf& rank_of, MergeScratch& scratch) {
  constexpr std::uint32_t kGone = UINT32_MAX;  // next[] of a part merged into its left one
  const auto n = static_cast<std::uint32_t>(piece.size());
  auto& next = scratch.next;  // parts are named by their start; next[s]: the following part's start
  auto& prev = scratch.prev;
  auto& heap = scratch.heap;
  next.resize(n);
  prev.resize(n);
  heap.clear();
  const auto bytes = [&](std::uint32_t begin, std::uint32_t end) { return piece.substr(begin, end - begin); };
  const std::greater<MergeScratch::Candidate> later;  // a min-heap on (rank, start)
  const auto offer = [&](std::uint32_t start, std::uint32_t end) {
    const std::uint32_t rank = rank_of(bytes(start, end));
    if (rank == kNoRank) return;
    heap.push_back({rank, start, end});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (std::uint32_t i = 0; i < n; ++i) {
    next[i] = i + 1;
    prev[i] = i - 1;  // wraps for the first part, never read
  }
  for (std::uint32_t i = 0; i + 1 < n; ++i) offer(i, i + 2);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const MergeScratch::Candidate best = heap.back();
    heap.pop_back();
    // Stale when either part has merged since: the pair no longer ends where it did.
    const std::uint32_t s = best.start, t = next[s];
    if (t == kGone || t >= n || next[t] != best.end) continue;
    const std::uint32_t u = best.end;
    next[s] = u;
    next[t] = kGone;
    if (u < n) {
      prev[u] = s;
      offer(s, next[u]);
    }
    if (s > 0) offer(prev[s], u);
  }
  scratch.starts.clear();
  for (std::uint32_t s = 0; s < n; s = next[s]) scratch.starts.push_back(s);
  scratch.starts.push_back(n);
}

template <class RankOf>
void byte_pair_merge(std::string_view piece, const RankOf& rank_of, MergeScratch& scratch) {
  if (piece.size() <= kScanLimit)
    byte_pair_merge_scan(piece, rank_of, scratch);
  else
    byte_pair_merge_heap(piece, rank_of, scratch);
}

// The ids of one piece appended to `ids`, as a Tokenizer encodes it: the piece's own rank
// when it is a token whole, else the ranks of the parts BPE merges it into. The trainer
// (text/bpe_trainer.cpp) keeps its pieces' encodings through this very function.
template <class RankOf>
void encode_piece(std::string_view piece, const RankOf& rank_of, MergeScratch& scratch,
                  std::vector<std::uint32_t>& ids) {
  if (const std::uint32_t whole = rank_of(piece); whole != kNoRank) {
    ids.push_back(whole);
    return;
  }
  byte_pair_merge(piece, rank_of, scratch);
  const auto& starts = scratch.starts;
  for (std::size_t i = 0; i + 1 < starts.size(); ++i)
    ids.push_back(rank_of(piece.substr(starts[i], starts[i + 1] - starts[i])));
}

}  // namespace xgrad::text::detail
