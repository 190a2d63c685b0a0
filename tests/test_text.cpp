#define BOOST_TEST_MODULE text
// The byte-level text corpus of the lm task: vocabulary, splits and batches.
#include "helpers.hpp"

#include <unistd.h>

#include <fstream>
#include <set>

#include "text.hpp"

using namespace xgrad;
using namespace xgrad::test;
using tools::Split;
using tools::TextCorpus;

namespace {

// A file with `text`, removed at the end of the test.
struct TextFile {
  std::string path;
  explicit TextFile(const std::string& text) : path(str("/tmp/xgrad-text-", ::getpid(), "-", counter++, ".txt")) {
    std::ofstream(path, std::ios::binary) << text;
  }
  ~TextFile() { ::unlink(path.c_str()); }
  static inline int counter = 0;
};

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_vocabulary_is_the_sorted_distinct_bytes) {
  const TextFile file("banana bread\n");
  const TextCorpus corpus(file.path, "--text " + file.path);
  const std::vector<std::uint8_t> expected = {'\n', ' ', 'a', 'b', 'd', 'e', 'n', 'r'};
  BOOST_CHECK(corpus.vocabulary() == expected);
  BOOST_CHECK_EQUAL(corpus.size(), 13u);
  BOOST_CHECK_EQUAL(corpus.split_end(Split::train), 12u);  // the first 90%, rounded up
  BOOST_CHECK_EQUAL(corpus.decode({3, 2, 6}), "ban");
  check_error([&] { corpus.decode({8}); }, {"decode", "8"});
}

BOOST_AUTO_TEST_CASE(batches_stay_inside_their_split_and_shift_by_one) {
  // Training text uses a..e only; the validation tenth is all 'z': a training window that
  // touched it would show a 'z'.
  const std::string text = repeat("abcdeedcba", 90) + std::string(100, 'z');
  const TextFile file(text);
  const TextCorpus corpus(file.path, "--text " + file.path);
  BOOST_REQUIRE_EQUAL(corpus.split_begin(Split::validation), 900u);
  const std::int64_t z = static_cast<std::int64_t>(corpus.vocabulary().size()) - 1;
  for (const std::size_t seq_len : {1u, 7u, 64u, 899u}) {
    BOOST_TEST_CONTEXT("seq_len " << seq_len) {
      Generator gen(seq_len);
      for (int round = 0; round < 20; ++round) {
        const tools::Batch b = corpus.batch(Split::train, 16, seq_len, gen);
        BOOST_REQUIRE(b.inputs.shape == (Shape{16, seq_len}));
        for (std::size_t r = 0; r < 16; ++r)
          for (std::size_t i = 0; i < seq_len; ++i) {
            BOOST_CHECK_NE(b.targets.values[r * seq_len + i], z);
            if (i + 1 < seq_len)
              BOOST_CHECK_EQUAL(b.inputs.values[r * seq_len + i + 1], b.targets.values[r * seq_len + i]);
          }
      }
    }
  }
  Generator gen(1);
  const tools::Batch v = corpus.batch(Split::validation, 8, 50, gen);
  for (const std::int64_t t : v.inputs.values) BOOST_CHECK_EQUAL(t, z);
  check_error([&] { corpus.batch(Split::validation, 1, 100, gen); }, {"validation split", "100 bytes", "101"});
  check_error([&] { corpus.batch(Split::train, 1, 900, gen); }, {"training split", "900"});
}

BOOST_AUTO_TEST_CASE(batches_are_a_function_of_the_generator) {
  const TextFile file(repeat("the quick brown fox jumps over the lazy dog. ", 40));
  const TextCorpus corpus(file.path, "--text " + file.path);
  Generator a(42), b(42), c(43);
  const tools::Batch first = corpus.batch(Split::train, 4, 32, a), again = corpus.batch(Split::train, 4, 32, b);
  BOOST_CHECK(first.inputs.values == again.inputs.values);
  BOOST_CHECK(first.targets.values == again.targets.values);
  BOOST_CHECK(corpus.batch(Split::train, 4, 32, c).inputs.values != first.inputs.values);
}

BOOST_AUTO_TEST_CASE(unusable_files_are_named) {
  check_error([] { TextCorpus("/nonexistent/kjv.txt", "--text /nonexistent/kjv.txt"); },
              {"--text /nonexistent/kjv.txt", "cannot open"});
  const TextFile empty("");
  check_error([&] { TextCorpus corpus(empty.path, "--text " + empty.path); }, {"--text", "is empty"});
  check_error([] { TextCorpus("/tmp", "--text /tmp"); }, {"--text /tmp", "is a folder"});
}

// The default corpus that ./run writes (Debian's bible-kjv): about 4.3 MB, 73 distinct bytes.
BOOST_AUTO_TEST_CASE(the_king_james_bible_as_run_prepares_it) {
  const std::string path = XGRAD_SOURCE_DIR "/data/kjv.txt";
  if (::access(path.c_str(), R_OK) != 0) {
    BOOST_TEST_MESSAGE("skipped: " << path << " is made by ./run");
    return;
  }
  const TextCorpus corpus(path, "--text " + path);
  BOOST_CHECK_GT(corpus.size(), 4'000'000u);
  BOOST_CHECK_EQUAL(corpus.vocabulary().size(), 73u);
  Generator gen(0);
  const std::string text = corpus.decode(corpus.batch(Split::validation, 1, 200, gen).inputs.values);
  BOOST_CHECK(text.find(' ') != std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_vocabulary_as_checkpoint_text_and_prompts_as_tokens) {
  const std::vector<std::uint8_t> vocabulary = {0x0a, 0x20, 0x41, 0x61, 0xff};
  BOOST_CHECK_EQUAL(tools::vocabulary_to_hex(vocabulary), "0a204161ff");
  BOOST_CHECK(tools::vocabulary_from_hex("0a204161ff") == vocabulary);
  // Damaged text is refused, not half read: odd length, not hex, upper case, unsorted, repeated, empty.
  for (const char* damaged : {"0a2", "0x20", "0A", "200a", "2020", ""})
    BOOST_CHECK_MESSAGE(!tools::vocabulary_from_hex(damaged), damaged);
  BOOST_CHECK(tools::encode(vocabulary, "Aa \n") == (std::vector<std::int64_t>{2, 3, 1, 0}));
  BOOST_CHECK_EQUAL(tools::decode(vocabulary, {2, 3, 1, 0, 4}), "Aa \n\xff");
  check_error([&] { tools::encode(vocabulary, "AB"); }, {"encode", "byte 66", "'B'", "vocabulary of 5"});
  check_error([&] { tools::decode(vocabulary, {5}); }, {"decode", "token 5"});
}
