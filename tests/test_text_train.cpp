#define BOOST_TEST_MODULE text_train
// Learning a vocabulary (text/bpe_trainer.hpp): the trainer against the training written
// plainly (every step re-encodes every piece with a Tokenizer of the ranks so far and
// counts the pairs), the tie rule, the stops, special tokens, the same vocabulary on any
// thread count and in any order of texts, the formats, the King James Bible, bad options.
#include "helpers.hpp"

#include <unistd.h>
#include <map>
#include <random>

#include "xgrad/autograd/files.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/text/text.hpp"

using namespace xgrad;
using namespace xgrad::text;
using xgrad::test::check_error;

namespace {

using Stop = TrainedVocabulary::Stop;

struct Reference {
  std::vector<std::string> ranked;
  Stop stop;
};

// The training as the header states it, with nothing kept from step to step.
Reference reference_training(const std::vector<std::string>& texts, const BpeTrainerOptions& options) {
  std::map<std::string, std::uint64_t> pieces;
  for (const std::string& text : texts)
    for (const std::string_view piece : gpt2_pieces(text)) {
      BOOST_REQUIRE(gpt2_pieces(piece).size() == 1);  // so a piece encodes alone as in its text
      ++pieces[std::string(piece)];
    }
  Reference reference;
  for (int byte = 0; byte < 256; ++byte) reference.ranked.emplace_back(1, static_cast<char>(byte));
  const std::size_t rank_limit = options.vocabulary_size - options.special_tokens.size();
  while (reference.ranked.size() < rank_limit) {
    const Tokenizer tokenizer(reference.ranked);
    std::map<std::string, std::uint64_t> pairs;  // by bytes: ascending, as unsigned bytes
    for (const auto& [piece, count] : pieces) {
      const std::vector<TokenId> ids = tokenizer.encode_ordinary(piece);
      for (std::size_t i = 0; i + 1 < ids.size(); ++i)
        pairs[std::string(tokenizer.token_bytes(ids[i])) + std::string(tokenizer.token_bytes(ids[i + 1]))] += count;
    }
    for (const std::string& special : options.special_tokens) pairs.erase(special);
    const std::pair<const std::string, std::uint64_t>* best = nullptr;
    for (const auto& pair : pairs)
      if (!best || pair.second > best->second) best = &pair;  // the first of the most: the smallest bytes
    if (!best) return reference.stop = Stop::no_pairs_left, reference;
    if (best->second < options.min_pair_count) return reference.stop = Stop::pairs_too_rare, reference;
    reference.ranked.push_back(best->first);
  }
  reference.stop = Stop::vocabulary_full;
  return reference;
}

std::vector<std::string> ranked_of(const Tokenizer& tokenizer) {
  std::vector<std::string> ranked;
  for (TokenId id = 0; id < tokenizer.rank_count(); ++id) ranked.emplace_back(tokenizer.token_bytes(id));
  return ranked;
}

TrainedVocabulary train_texts(const std::vector<std::string>& texts, const BpeTrainerOptions& options) {
  PieceCounts counts;
  for (const std::string& text : texts) counts.add(text);
  return train_bpe(counts, options);
}

// Checks the trainer against the reference, and that the tokenizer encodes the texts
// into as many tokens as the trainer says.
void check_against_reference(const std::vector<std::string>& texts, const BpeTrainerOptions& options) {
  const TrainedVocabulary trained = train_texts(texts, options);
  const Reference reference = reference_training(texts, options);
  const std::vector<std::string> ranked = ranked_of(trained.tokenizer);
  BOOST_CHECK_EQUAL(stop_name(trained.stop), stop_name(reference.stop));
  BOOST_REQUIRE_EQUAL(ranked.size(), reference.ranked.size());
  for (std::size_t rank = 256; rank < ranked.size(); ++rank)
    BOOST_REQUIRE_MESSAGE(ranked[rank] == reference.ranked[rank], "rank " << rank << ": " << quote_bytes(ranked[rank])
                                                                          << " where the reference made "
                                                                          << quote_bytes(reference.ranked[rank]));
  std::uint64_t bytes = 0, tokens = 0;
  for (const std::string& text : texts) {
    const std::vector<TokenId> ids = trained.tokenizer.encode_ordinary(text);
    BOOST_CHECK(trained.tokenizer.decode(ids) == text);
    bytes += text.size();
    tokens += ids.size();
  }
  BOOST_CHECK_EQUAL(trained.text_bytes, bytes);
  BOOST_CHECK_EQUAL(trained.text_tokens, tokens);
  std::vector<SpecialToken> specials = trained.tokenizer.special_tokens();
  BOOST_REQUIRE_EQUAL(specials.size(), options.special_tokens.size());
  for (std::size_t i = 0; i < specials.size(); ++i) {
    BOOST_CHECK_EQUAL(specials[i].text, options.special_tokens[i]);
    BOOST_CHECK_EQUAL(specials[i].id, ranked.size() + i);
  }
}

// Random text from units that make long runs, repeats, overlapping pairs ("aaa"),
// whitespace runs, multi-byte characters and bytes outside UTF-8.
std::string random_text(std::uint32_t seed, std::size_t units) {
  static const std::vector<std::string> kUnits = {"a",  "b",    "ab", "aa", "ba",       " ",    "  ",      "\n",
                                                  "é",  "\xFF", "1",  "22", "the",      " the", "'s",      "!",
                                                  "\t", "xyz",  "ü",  "ñn", "\xE2\x82", "日本", "aaaaaaa", "   \n"};
  std::mt19937 gen(seed);
  std::string text;
  for (std::size_t i = 0; i < units; ++i) text += kUnits[gen() % kUnits.size()];
  return text;
}

std::string king_james_bible() {
  const std::string path = XGRAD_SOURCE_DIR "/data/kjv.txt";
  if (::access(path.c_str(), R_OK) != 0) return {};
  return read_regular_file(path, "test");
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_trainer_makes_the_references_vocabulary) {
  for (std::uint32_t seed = 1; seed <= 6; ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      const std::vector<std::string> texts = {random_text(seed, 3000), random_text(seed + 100, 500)};
      check_against_reference(texts, {.vocabulary_size = 256 + 150 + seed * 10, .min_pair_count = seed % 3 + 1});
    }
  }
}

BOOST_AUTO_TEST_CASE(the_trainer_makes_the_references_vocabulary_on_english) {
  std::string english = king_james_bible().substr(0, 40000);
  if (english.empty())  // without data/kjv.txt: a text of English words all the same
    for (int i = 0; i < 3000; ++i) english += " and the word of the LORD came unto him, saying\n";
  check_against_reference({english}, {.vocabulary_size = 700, .special_tokens = {"<|endoftext|>"}});
}

BOOST_AUTO_TEST_CASE(long_pieces_and_runs_train_as_the_reference_does) {
  // 5,000 of one character (one piece, "aaa..." overlapping its own pairs), a long run of
  // spaces, a long word of two letters.
  std::string word;
  for (int i = 0; i < 3000; ++i) word += (i * 7 % 5 < 2) ? 'x' : 'y';
  const std::vector<std::string> texts = {std::string(5000, 'a'), "a" + std::string(4000, ' ') + "b", word,
                                          "ab ab ab ab ab"};
  check_against_reference(texts, {.vocabulary_size = 400, .min_pair_count = 1});
  // Text of long pieces with no spaces, as DNA: the trainer merges in place, and must
  // hold each piece as the tokenizer encodes it all along (a merge's neighbours, runs of
  // one token merging with itself, a piece with the pair at both ends).
  std::uint32_t state = 12345;
  std::string dna;
  for (int i = 0; i < 6000; ++i) dna += "ACGT"[(state = state * 1664525u + 1013904223u) >> 30];
  check_against_reference({dna, "GATTACA" + dna.substr(0, 999) + "GATTACA", "CCCCCCCCCAAAAAAAA"},
                          {.vocabulary_size = 420, .min_pair_count = 1});
}

BOOST_AUTO_TEST_CASE(training_reports_each_rank_and_stops_when_told) {
  std::vector<std::size_t> seen;
  const TrainedVocabulary trained = train_bpe(
      random_text(3, 3000), {.vocabulary_size = 300, .after_each_rank = [&](std::size_t r) { seen.push_back(r); }});
  BOOST_REQUIRE_EQUAL(seen.size(), trained.merges());
  for (std::size_t i = 0; i < seen.size(); ++i) BOOST_CHECK_EQUAL(seen[i], 257 + i);
  struct Stop {};
  BOOST_CHECK_THROW(train_bpe(random_text(3, 3000), {.vocabulary_size = 300,
                                                     .after_each_rank =
                                                         [](std::size_t r) {
                                                           if (r == 270) throw Stop{};
                                                         }}),
                    Stop);
}

BOOST_AUTO_TEST_CASE(of_pairs_with_equal_counts_the_smallest_bytes_win) {
  // Twice each: "xy", " a" and "ab" (and " x" once): " a" (0x20 0x61) is smallest.
  TrainedVocabulary trained = train_bpe("xy xy ab ab", {.vocabulary_size = 257});
  BOOST_CHECK_EQUAL(trained.tokenizer.token_bytes(256), " a");
  // Bytes compare as unsigned: "\x7F\x7F" before "é" (0xC3 0xA9), though char is signed.
  trained = train_bpe("\x7F\x7F\xC3\xA9\x7F\x7F\xC3\xA9", {.vocabulary_size = 257});
  BOOST_CHECK_EQUAL(trained.tokenizer.token_bytes(256), "\x7F\x7F");
  // A count decides before bytes do.
  trained = train_bpe("zz zz zz ab ab", {.vocabulary_size = 257});
  BOOST_CHECK_EQUAL(trained.tokenizer.token_bytes(256), "zz");
}

BOOST_AUTO_TEST_CASE(training_stops_where_the_pairs_run_out) {
  // "ab" three times, then " ab" twice: with min_pair_count 3, one merge.
  TrainedVocabulary trained = train_bpe("ab ab ab", {.vocabulary_size = 1000, .min_pair_count = 3});
  BOOST_CHECK_EQUAL(stop_name(trained.stop), "pairs_too_rare");
  BOOST_CHECK_EQUAL(trained.merges(), 1u);
  BOOST_CHECK_EQUAL(trained.tokenizer.vocabulary_size(), 257u);
  // Every piece one token: no pair is left.
  trained = train_bpe("ab ab ab", {.vocabulary_size = 1000, .special_tokens = {"<|endoftext|>"}});
  BOOST_CHECK_EQUAL(stop_name(trained.stop), "no_pairs_left");
  BOOST_CHECK_EQUAL(trained.merges(), 2u);  // "ab", " ab"
  BOOST_CHECK_EQUAL(trained.text_tokens, 3u);
  BOOST_CHECK_EQUAL(trained.bytes_per_token(), 8.0 / 3.0);
  BOOST_CHECK_EQUAL(*trained.tokenizer.find_special("<|endoftext|>"), 258u);  // right after the ranks
  // No text at all: the 256 bytes and the special tokens.
  trained = train_bpe("", {.vocabulary_size = 300, .special_tokens = {"<|endoftext|>"}});
  BOOST_CHECK_EQUAL(stop_name(trained.stop), "no_pairs_left");
  BOOST_CHECK_EQUAL(trained.tokenizer.vocabulary_size(), 257u);
  BOOST_CHECK_EQUAL(trained.bytes_per_token(), 0.0);
  // The largest size: the text, not the size, bounds the work and the memory.
  trained = train_bpe("ab ab ab", {.vocabulary_size = std::size_t{1} << 32});
  BOOST_CHECK_EQUAL(stop_name(trained.stop), "no_pairs_left");
  BOOST_CHECK_EQUAL(trained.merges(), 2u);
  // Exactly the size asked.
  trained = train_bpe("ab ab ab", {.vocabulary_size = 257, .special_tokens = {}});
  BOOST_CHECK_EQUAL(stop_name(trained.stop), "vocabulary_full");
  BOOST_CHECK_EQUAL(trained.tokenizer.vocabulary_size(), 257u);
}

BOOST_AUTO_TEST_CASE(a_special_tokens_text_is_never_learned) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += " and so and";
  const std::vector<std::string> specials = {" and", "<|endoftext|>"};
  const TrainedVocabulary trained = train_bpe(text, {.vocabulary_size = 300, .special_tokens = specials});
  BOOST_CHECK_EQUAL(*trained.tokenizer.find_special(" and"), trained.tokenizer.rank_count());
  BOOST_CHECK(!trained.tokenizer.find_token(" and"));
  BOOST_CHECK(trained.tokenizer.find_token(" an"));  // learned as far as it may go
  check_against_reference({text}, {.vocabulary_size = 300, .special_tokens = specials});
}

BOOST_AUTO_TEST_CASE(the_order_of_the_texts_changes_nothing) {
  const std::vector<std::string> texts = {random_text(7, 2000), random_text(8, 2000), "hello hello world"};
  PieceCounts forward, backward;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    forward.add(texts[i]);
    backward.add(texts[texts.size() - 1 - i]);
  }
  BOOST_CHECK_EQUAL(forward.pieces(), backward.pieces());
  BOOST_CHECK_EQUAL(forward.bytes(), backward.bytes());
  BOOST_CHECK_EQUAL(forward.unique_pieces(), backward.unique_pieces());
  const BpeTrainerOptions options{.vocabulary_size = 500};
  BOOST_CHECK_EQUAL(train_bpe(forward, options).tokenizer.identity(),
                    train_bpe(backward, options).tokenizer.identity());
}

BOOST_AUTO_TEST_CASE(a_long_text_gives_the_same_vocabulary_on_any_thread_count) {
  // About 1.5 MB: counted in stretches on the pool.
  std::string text;
  for (std::uint32_t part = 0; text.size() < 1'500'000; ++part) text += random_text(part, 2000) + " . ";
  std::vector<std::string> identities;
  std::uint64_t pieces = 0;
  for (const int threads : {1, 2, 3}) {
    set_num_threads(threads);
    PieceCounts counts;
    counts.add(text);
    if (threads == 1) pieces = gpt2_pieces(text).size();
    BOOST_CHECK_EQUAL(counts.pieces(), pieces);  // the whole text's pieces, cut or not
    identities.push_back(train_bpe(counts, {.vocabulary_size = 1500}).tokenizer.identity());
  }
  set_num_threads(2);
  BOOST_CHECK_EQUAL(identities[0], identities[1]);
  BOOST_CHECK_EQUAL(identities[0], identities[2]);
}

BOOST_AUTO_TEST_CASE(the_king_james_bible_to_8192_tokens) {
  const std::string kjv = king_james_bible();
  if (kjv.empty()) {
    BOOST_TEST_MESSAGE("skipped: data/kjv.txt is missing (./run writes it)");
    return;
  }
  const BpeTrainerOptions options{.vocabulary_size = 8192, .special_tokens = {"<|endoftext|>"}};
  std::vector<std::string> identities;
  std::optional<TrainedVocabulary> trained;
  for (const int threads : {1, 2, 3}) {
    set_num_threads(threads);
    trained.emplace(train_bpe(kjv, options));
    identities.push_back(trained->tokenizer.identity());
  }
  set_num_threads(2);
  BOOST_CHECK_EQUAL(identities[0], identities[1]);
  BOOST_CHECK_EQUAL(identities[0], identities[2]);
  const Tokenizer& tokenizer = trained->tokenizer;
  BOOST_CHECK_EQUAL(stop_name(trained->stop), "vocabulary_full");
  BOOST_CHECK_EQUAL(tokenizer.vocabulary_size(), 8192u);
  BOOST_CHECK_EQUAL(*tokenizer.find_special("<|endoftext|>"), 8191u);
  // The tokenizer encodes the text into the tokens training ended with.
  const std::vector<TokenId> ids = tokenizer.encode_ordinary(kjv);
  BOOST_CHECK_EQUAL(trained->text_tokens, ids.size());
  BOOST_CHECK_EQUAL(trained->text_bytes, kjv.size());
  BOOST_CHECK(tokenizer.decode(ids) == kjv);
  BOOST_TEST_MESSAGE("the KJV: " << trained->bytes_per_token() << " bytes per token");
  // Both formats hold it.
  const Gpt2Vocabulary gpt2 = format_gpt2_vocabulary(tokenizer);
  const std::vector<SpecialToken> specials = tokenizer.special_tokens();
  BOOST_CHECK_EQUAL(
      parse_gpt2_vocabulary({"encoder.json", gpt2.encoder_json}, {"vocab.bpe", gpt2.vocab_bpe}).identity(),
      tokenizer.identity());
  BOOST_CHECK_EQUAL(parse_tiktoken_ranks({"kjv.tiktoken", format_tiktoken_ranks(tokenizer)}, specials).identity(),
                    tokenizer.identity());
}

BOOST_AUTO_TEST_CASE(bad_options_name_the_option_and_its_value) {
  const std::string text = "some text";
  check_error([&] { train_bpe(text, {}); }, {"train_bpe", "vocabulary_size is 0", "at least 256"});
  check_error([&] { train_bpe(text, {.vocabulary_size = 255}); }, {"vocabulary_size is 255", "at least 256"});
  check_error(
      [&] {
        train_bpe(text, {.vocabulary_size = 257, .special_tokens = {"<a>", "<b>"}});
      },
      {"vocabulary_size is 257", "at least 258", "2 special tokens"});
  check_error([&] { train_bpe(text, {.vocabulary_size = (std::size_t{1} << 32) + 1}); },
              {"vocabulary_size is 4294967297", "at most 2^32"});
  check_error([&] { train_bpe(text, {.vocabulary_size = 300, .min_pair_count = 0}); },
              {"min_pair_count is 0", "at least 1"});
  check_error(
      [&] {
        train_bpe(text, {.vocabulary_size = 300, .special_tokens = {"<a>", ""}});
      },
      {"special_tokens[1] is empty"});
  check_error(
      [&] {
        train_bpe(text, {.vocabulary_size = 300, .special_tokens = {"<a>", "<b>", "<a>"}});
      },
      {"special_tokens[0] and [2]", "<a>"});
  check_error([&] { train_bpe(PieceCounts(), {.vocabulary_size = 1}); }, {"vocabulary_size is 1"});
  // A special token that is one byte is an ordinary token already.
  check_error(
      [&] {
        train_bpe(text, {.vocabulary_size = 300, .special_tokens = {"<a>", "a"}});
      },
      {"special_tokens[1] is \"a\"", "a single byte"});
}
