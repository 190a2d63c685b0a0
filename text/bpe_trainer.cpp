#include "xgrad/text/bpe_trainer.hpp"

#include <algorithm>
#include <queue>
#include <utility>

#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/text/detail/byte_string_map.hpp"
#include "xgrad/text/detail/merge.hpp"
#include "xgrad/text/pretokenizer.hpp"
#include "xgrad/text/utf8.hpp"

namespace xgrad::text {

namespace {

constexpr const char* kTrain = "train_bpe";

// Texts are counted in stretches of about this many bytes, one per task on the pool.
constexpr std::size_t kStretchBytes = std::size_t{1} << 18;

struct ViewHash {
  std::size_t operator()(std::string_view bytes) const noexcept { return detail::hash_bytes(bytes); }
};
using ViewCounts = std::unordered_map<std::string_view, std::uint64_t, ViewHash>;

}  // namespace

void PieceCounts::add(std::string_view text) {
  std::vector<std::size_t> cuts = {0};
  while (cuts.back() < text.size())
    cuts.push_back(gpt2_safe_cut(text, std::min(text.size(), cuts.back() + kStretchBytes)));
  std::vector<ViewCounts> stretches(cuts.size() - 1);
  std::vector<std::uint64_t> stretch_pieces(stretches.size(), 0);
  constexpr double kWorkPerByte = 10;  // roughly: reading, classing, hashing
  parallel_for(stretches.size(), kWorkPerByte * kStretchBytes, [&](std::size_t i) {
    Gpt2Pieces pieces(text.substr(cuts[i], cuts[i + 1] - cuts[i]));
    for (std::string_view piece = pieces.next(); !piece.empty(); piece = pieces.next()) {
      ++stretches[i][piece];
      ++stretch_pieces[i];
    }
  });
  for (std::size_t i = 0; i < stretches.size(); ++i) {
    for (const auto& [piece, count] : stretches[i]) counts_[std::string(piece)] += count;
    pieces_ += stretch_pieces[i];
  }
  bytes_ += text.size();
}

std::vector<std::pair<std::string_view, std::uint64_t>> PieceCounts::sorted() const {
  std::vector<std::pair<std::string_view, std::uint64_t>> pieces(counts_.begin(), counts_.end());
  std::sort(pieces.begin(), pieces.end());
  return pieces;
}

const char* stop_name(TrainedVocabulary::Stop stop) noexcept {
  switch (stop) {
    case TrainedVocabulary::Stop::vocabulary_full:
      return "vocabulary_full";
    case TrainedVocabulary::Stop::pairs_too_rare:
      return "pairs_too_rare";
    case TrainedVocabulary::Stop::no_pairs_left:
      return "no_pairs_left";
  }
  return "unknown";
}

namespace {

void check_options(const BpeTrainerOptions& options) {
  const std::vector<std::string>& specials = options.special_tokens;
  for (std::size_t i = 0; i < specials.size(); ++i) {
    XGRAD_CHECK(!specials[i].empty(), kTrain, "special_tokens[", i, "] is empty");
    XGRAD_CHECK(specials[i].size() > 1, kTrain, "special_tokens[", i, "] is ", quote_bytes(specials[i]),
                ", a single byte: an ordinary token already");
    for (std::size_t j = 0; j < i; ++j)
      XGRAD_CHECK(specials[j] != specials[i], kTrain, "special_tokens[", j, "] and [", i, "] are both ",
                  quote_bytes(specials[i]));
  }
  const std::size_t least = 256 + specials.size();
  XGRAD_CHECK(options.vocabulary_size >= least, kTrain, "vocabulary_size is ", options.vocabulary_size,
              ": it must be at least ", least, " (the 256 single bytes",
              specials.empty() ? std::string() : str(" and ", specials.size(), " special tokens"), ")");
  constexpr std::size_t kMost = std::size_t{1} << 32;  // ids are 32-bit
  XGRAD_CHECK(options.vocabulary_size <= kMost, kTrain, "vocabulary_size is ", options.vocabulary_size,
              ": it must be at most 2^32 = ", kMost, " (token ids are 32-bit)");
  XGRAD_CHECK(options.min_pair_count >= 1, kTrain, "min_pair_count is 0: it must be at least 1");
}

// At most one merge per byte of a piece but its first: a bound on the ranks a text can
// make, however large the vocabulary asked for.
std::size_t possible_merges(const std::vector<std::pair<std::string_view, std::uint64_t>>& pieces) {
  std::size_t merges = 0;
  for (const auto& [piece, count] : pieces) merges += piece.size() - 1;
  return merges;
}

// The training state: every distinct piece held encoded as the ranks so far encode it,
// and for each byte string that two adjacent tokens make somewhere (a candidate), its
// count and the pieces that may hold it.
class Trainer {
 public:
  Trainer(const PieceCounts& counts, const BpeTrainerOptions& options)
      : options_(options),
        rank_limit_(options.vocabulary_size - options.special_tokens.size()),
        pieces_(counts.sorted()),
        ranks_(std::min(rank_limit_, 256 + possible_merges(pieces_))),
        encodings_(pieces_.size()),
        visited_(pieces_.size(), 0) {
    for (int byte = 0; byte < 256; ++byte) ranks_.add(std::string(1, static_cast<char>(byte)));
    for (std::uint32_t piece = 0; piece < pieces_.size(); ++piece) {
      encode(piece, encodings_[piece]);
      const std::vector<TokenId>& ids = encodings_[piece];
      for (std::size_t i = 0; i + 1 < ids.size(); ++i) count_place(ids[i], ids[i + 1], piece, +1);
    }
    for (std::uint32_t c = 0; c < candidates_.size(); ++c) offer(c);
  }

  TrainedVocabulary run() {
    TrainedVocabulary::Stop stop = TrainedVocabulary::Stop::vocabulary_full;
    while (ranks_.size() < rank_limit_) {
      const std::uint32_t best = pop_best();
      if (best == kNone) {
        stop = TrainedVocabulary::Stop::no_pairs_left;
        break;
      }
      if (candidates_[best].count < options_.min_pair_count) {
        stop = TrainedVocabulary::Stop::pairs_too_rare;
        break;
      }
      make_token(best);
      if (options_.after_each_rank) options_.after_each_rank(ranks_.size());
    }
    return result(stop);
  }

 private:
  static constexpr std::uint32_t kNone = UINT32_MAX;

  struct Candidate {
    TokenId left = 0, right = 0;        // the two tokens
    std::string bytes;                  // the two tokens end to end
    std::uint64_t count = 0;            // places, repetitions of pieces included
    std::vector<std::uint32_t> pieces;  // pieces that held it when counted (some since changed)
    bool settled = false;               // made a token, or a special token's text
    std::uint64_t count_before = 0;     // at the start of the current step, when touched in it
    std::uint64_t touched_in = 0;       // the step that last touched it
  };

  // A candidate with the count it had when queued: current when it still has it.
  struct Queued {
    std::uint64_t count;
    std::uint32_t candidate;
  };

  // Most frequent first; of equal counts, the smallest bytes first.
  struct Later {
    const std::vector<Candidate>* candidates;
    bool operator()(const Queued& a, const Queued& b) const {
      if (a.count != b.count) return a.count < b.count;
      return (*candidates)[a.candidate].bytes > (*candidates)[b.candidate].bytes;
    }
  };

  void encode(std::uint32_t piece, std::vector<TokenId>& ids) {
    ids.clear();
    detail::encode_piece(pieces_[piece].first, rank_of_, scratch_, ids);
  }

  // The candidate that tokens `left` and `right` make end to end, made when new. Its bytes
  // name it as well as the pair does: wherever two adjacent tokens of an encoding make
  // them, BPE over those bytes alone merges them into the same two tokens.
  std::uint32_t candidate_of(TokenId left, TokenId right) {
    const std::uint64_t pair = (std::uint64_t{left} << 32) | right;
    if (const auto known = candidate_of_pair_.find(pair); known != candidate_of_pair_.end()) return known->second;
    const auto c = static_cast<std::uint32_t>(candidates_.size());
    Candidate& candidate = candidates_.emplace_back();
    candidate.left = left;
    candidate.right = right;
    candidate.bytes.append(ranks_.key(left)).append(ranks_.key(right));
    candidate.settled = is_special(candidate.bytes);
    candidate_of_pair_.emplace(pair, c);
    return c;
  }

  bool is_special(std::string_view bytes) const {
    const auto& specials = options_.special_tokens;
    return std::find(specials.begin(), specials.end(), bytes) != specials.end();
  }

  // Adds (sign +1) or removes (-1) the place of tokens `left`, `right` in `piece` to its
  // candidate's count, recording the candidate's count before the step's first change.
  void count_place(TokenId left, TokenId right, std::uint32_t piece, int sign) {
    const std::uint32_t c = candidate_of(left, right);
    Candidate& candidate = candidates_[c];
    if (candidate.touched_in != step_) {
      candidate.touched_in = step_;
      candidate.count_before = candidate.count;
      touched_.push_back(c);
    }
    const std::uint64_t repeats = pieces_[piece].second;
    if (sign > 0) {
      candidate.count += repeats;
      if (candidate.pieces.empty() || candidate.pieces.back() != piece) candidate.pieces.push_back(piece);
    } else {
      candidate.count -= repeats;
    }
  }

  void offer(std::uint32_t c) {
    if (candidates_[c].count > 0 && !candidates_[c].settled) queue_.push({candidates_[c].count, c});
  }

  // The most frequent candidate not settled (kNone when there is none). Entries are
  // queued whenever a count grows, so each candidate has one at least as large as its
  // count: an entry larger than its candidate's count is re-queued with the count, a
  // smaller one dropped (a larger one is queued).
  std::uint32_t pop_best() {
    while (!queue_.empty()) {
      const Queued top = queue_.top();
      queue_.pop();
      const Candidate& candidate = candidates_[top.candidate];
      if (candidate.settled || top.count < candidate.count) continue;
      if (top.count > candidate.count) {
        offer(top.candidate);
        continue;
      }
      return top.candidate;
    }
    return kNone;
  }

  // Adds the candidate as the next rank and merges its two tokens in the pieces holding
  // them: the only ones that change.
  void make_token(std::uint32_t c) {
    ++step_;
    touched_.clear();
    Candidate& made = candidates_[c];  // until merge_in makes a candidate: copy what it needs
    made.settled = true;
    const auto rank = static_cast<TokenId>(ranks_.size());
    ranks_.add(made.bytes);
    const TokenId left = made.left, right = made.right;
    for (const std::uint32_t piece : std::exchange(made.pieces, {})) {
      if (visited_[piece] == step_) continue;
      visited_[piece] = step_;
      merge_in(piece, left, right, rank);
    }
    for (const std::uint32_t t : touched_)
      if (candidates_[t].count > candidates_[t].count_before) offer(t);
  }

  // The piece as the ranks with the new one encode it: its two tokens merged wherever
  // they are adjacent, left to right. That is the whole of the change. The encoder merges
  // the lowest rank first, so from the old encoding (no pair of a lower rank left) it
  // merges the new rank's pairs, leftmost first; and a pair a merge makes cannot be a
  // lower rank: that token's bytes, alone, encode to that token (as every token's do,
  // made from two tokens adjacent in some piece), and here they encoded to three. Only
  // the places next to a merge change: those are counted out and in (re-encoding the
  // whole piece made training take minutes on text with long pieces, DNA or base64).
  void merge_in(std::uint32_t piece, TokenId left, TokenId right, TokenId rank) {
    std::vector<TokenId>& ids = encodings_[piece];
    merged_.clear();
    for (std::size_t i = 0; i + 1 < ids.size();) {
      if (ids[i] == left && ids[i + 1] == right) {
        merged_.push_back(i);
        i += 2;
      } else {
        ++i;
      }
    }
    if (merged_.empty()) return;  // it held them when counted, no longer
    // Out: the places (by their left token) that touch a merged pair, each once.
    std::size_t next_place = 0;
    for (const std::size_t at : merged_)
      for (std::size_t place = at > 0 ? at - 1 : 0; place <= at + 1 && place + 1 < ids.size(); ++place)
        if (place >= next_place) {
          count_place(ids[place], ids[place + 1], piece, -1);
          next_place = place + 1;
        }
    // The merge, in place; then in: the places that touch a new token, each once.
    std::size_t kept = 0, next_merge = 0;
    made_at_.clear();
    for (std::size_t i = 0; i < ids.size();) {
      if (next_merge < merged_.size() && merged_[next_merge] == i) {
        made_at_.push_back(kept);
        ids[kept++] = rank;
        i += 2;
        ++next_merge;
      } else {
        ids[kept++] = ids[i++];
      }
    }
    ids.resize(kept);
    next_place = 0;
    for (const std::size_t at : made_at_)
      for (std::size_t place = at > 0 ? at - 1 : 0; place <= at && place + 1 < ids.size(); ++place)
        if (place >= next_place) {
          count_place(ids[place], ids[place + 1], piece, +1);
          next_place = place + 1;
        }
  }

  TrainedVocabulary result(TrainedVocabulary::Stop stop) const {
    std::vector<std::string> ranked;
    ranked.reserve(ranks_.size());
    for (std::uint32_t rank = 0; rank < ranks_.size(); ++rank) ranked.emplace_back(ranks_.key(rank));
    std::vector<SpecialToken> specials;
    for (const std::string& text : options_.special_tokens)
      specials.push_back({text, static_cast<TokenId>(ranked.size() + specials.size())});
    std::uint64_t bytes = 0, tokens = 0;
    for (std::size_t piece = 0; piece < pieces_.size(); ++piece) {
      bytes += pieces_[piece].first.size() * pieces_[piece].second;
      tokens += encodings_[piece].size() * pieces_[piece].second;
    }
    return {Tokenizer(std::move(ranked), std::move(specials)), stop, bytes, tokens};
  }

  const BpeTrainerOptions& options_;
  const std::size_t rank_limit_;
  const std::vector<std::pair<std::string_view, std::uint64_t>> pieces_;  // sorted by bytes
  detail::ByteStringMap ranks_;                                           // the ranks so far, rank r the key of index r
  struct RankOf {
    const detail::ByteStringMap* ranks;
    std::uint32_t operator()(std::string_view bytes) const noexcept { return ranks->find(bytes); }
  };
  const RankOf rank_of_{&ranks_};
  detail::MergeScratch scratch_;

  std::vector<std::vector<TokenId>> encodings_;  // each piece's, by the ranks so far
  std::vector<std::uint64_t> visited_;           // the step that last merged in it
  std::vector<std::size_t> merged_, made_at_;    // merge_in's places: old and new

  std::unordered_map<std::uint64_t, std::uint32_t> candidate_of_pair_;
  std::vector<Candidate> candidates_;
  std::priority_queue<Queued, std::vector<Queued>, Later> queue_{Later{&candidates_}};

  std::uint64_t step_ = 0;
  std::vector<std::uint32_t> touched_;  // candidates whose count the step changed
};

}  // namespace

TrainedVocabulary train_bpe(const PieceCounts& counts, const BpeTrainerOptions& options) {
  check_options(options);
  return Trainer(counts, options).run();
}

TrainedVocabulary train_bpe(std::string_view text, const BpeTrainerOptions& options) {
  check_options(options);
  PieceCounts counts;
  counts.add(text);
  return Trainer(counts, options).run();
}

}  // namespace xgrad::text
