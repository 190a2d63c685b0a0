#define BOOST_TEST_MODULE text_shards
// Token shards in llm.c's format (text/token_shards.hpp) and the loader of training
// windows (text/token_loader.hpp): headers as llm.c writes them (read here byte by byte,
// apart from the reader), shards numpy writes as llm.c's write_datafile does, every class
// of bad shard, the writer's refusals; windows as a pure function of (seed, step, row),
// micro-batches tiling the batch, the splits' boundaries, evaluation windows.
#include "helpers.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "xgrad/autograd/parallel.hpp"
#include "xgrad/text/detail/philox.hpp"
#include "xgrad/text/text.hpp"

using namespace xgrad;
using namespace xgrad::text;
using namespace xgrad::test;
namespace fs = std::filesystem;

namespace {

// Little-endian integers of `width` bytes, by hand.
void append_le(std::string& out, std::uint64_t value, int width) {
  for (int i = 0; i < width; ++i) out += static_cast<char>(value >> (8 * i));
}
std::uint64_t le_at(const std::string& bytes, std::size_t offset, int width) {
  std::uint64_t value = 0;
  for (int i = 0; i < width; ++i) value |= std::uint64_t{static_cast<unsigned char>(bytes[offset + i])} << (8 * i);
  return value;
}

// A shard's bytes made by hand: the three header fields, zeros, then the tokens.
std::string shard_bytes(std::int32_t magic, std::int32_t version, std::int32_t count,
                        const std::vector<std::uint32_t>& tokens, int width) {
  std::string bytes;
  for (const std::int32_t field : {magic, version, count}) append_le(bytes, static_cast<std::uint32_t>(field), 4);
  bytes.resize(1024, '\0');
  for (const std::uint32_t token : tokens) append_le(bytes, token, width);
  return bytes;
}

std::vector<std::uint32_t> ramp(std::size_t n, std::uint32_t first = 0) {
  std::vector<std::uint32_t> tokens(n);
  for (std::size_t i = 0; i < n; ++i) tokens[i] = first + static_cast<std::uint32_t>(i);
  return tokens;
}

// A shard written by xgrad's writer.
void write_shard(const fs::path& path, const std::vector<std::uint32_t>& tokens, std::size_t vocabulary_size) {
  ShardWriter writer(path.string(), vocabulary_size);
  writer.write(tokens);
  writer.commit();
}

std::vector<std::uint32_t> all_tokens(const TokenShard& shard) {
  std::vector<std::uint32_t> tokens(shard.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = shard.at(i);
  return tokens;
}

// A shard numpy writes as llm.c's write_datafile does; its tokens by the script's formula.
std::vector<std::uint32_t> write_with_numpy(const fs::path& path, const std::string& model_desc, std::size_t count,
                                            std::size_t vocabulary_size) {
  const std::string command = "/usr/bin/python3 " XGRAD_REFERENCE_DIR "/write_token_shard.py '" + path.string() + "' " +
                              model_desc + " " + std::to_string(count) + " " + std::to_string(vocabulary_size);
  BOOST_REQUIRE_MESSAGE(std::system(command.c_str()) == 0, "failed: " << command);
  std::vector<std::uint32_t> tokens(count);
  for (std::size_t i = 0; i < count; ++i) tokens[i] = static_cast<std::uint32_t>((i * 7919 + 13) % vocabulary_size);
  return tokens;
}

}  // namespace

// ---- the format ------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(a_shard_xgrad_writes_has_llm_cs_header_fields) {
  const fs::path folder = fresh_folder("test-shards", "header");
  struct Case {
    std::string name;
    std::size_t vocabulary_size;
    std::vector<std::uint32_t> tokens;
    std::uint64_t magic, version;
    int width;
  };
  for (const Case& c : {Case{"gpt2.bin", 65536, {0, 1, 50256, 65535, 7, 300}, 20240520, 1, 2},
                        Case{"llama3.bin", 128256, {0, 65536, 128255, 5}, 20240801, 7, 4}}) {
    BOOST_TEST_CONTEXT(c.name) {
      write_shard(folder / c.name, c.tokens, c.vocabulary_size);
      const std::string bytes = file_bytes(folder / c.name);
      BOOST_REQUIRE_EQUAL(bytes.size(), 1024 + c.tokens.size() * c.width);
      BOOST_CHECK_EQUAL(le_at(bytes, 0, 4), c.magic);
      BOOST_CHECK_EQUAL(le_at(bytes, 4, 4), c.version);
      BOOST_CHECK_EQUAL(le_at(bytes, 8, 4), c.tokens.size());
      for (std::size_t field = 3; field < 256; ++field) BOOST_CHECK_EQUAL(le_at(bytes, 4 * field, 4), 0u);
      for (std::size_t i = 0; i < c.tokens.size(); ++i)
        BOOST_CHECK_EQUAL(le_at(bytes, 1024 + i * c.width, c.width), c.tokens[i]);
    }
  }
  BOOST_CHECK(TokenShard((folder / "gpt2.bin").string(), 65536).format() == ShardFormat::gpt2);
  BOOST_CHECK(TokenShard((folder / "llama3.bin").string(), 128256).format() == ShardFormat::llama3);
}

BOOST_AUTO_TEST_CASE(shards_numpy_writes_as_llm_c_does_read_back) {
  const fs::path folder = fresh_folder("test-shards", "numpy");
  for (const auto& [desc, count, vocabulary_size, format] :
       {std::tuple{"gpt-2", 5000, 50257, ShardFormat::gpt2}, std::tuple{"gpt-2", 1, 65536, ShardFormat::gpt2},
        std::tuple{"llama-3", 3000, 128256, ShardFormat::llama3}}) {
    BOOST_TEST_CONTEXT(desc << ", " << count << " tokens") {
      const fs::path path = folder / (std::string(desc) + std::to_string(count) + ".bin");
      const std::vector<std::uint32_t> tokens = write_with_numpy(path, desc, count, vocabulary_size);
      const TokenShard shard(path.string(), vocabulary_size);
      BOOST_CHECK(shard.format() == format);
      BOOST_CHECK(all_tokens(shard) == tokens);
      // And xgrad writes the very same bytes.
      ShardWriter writer((folder / "again.bin").string(), vocabulary_size);
      writer.write(tokens);
      writer.commit();
      BOOST_CHECK(file_bytes(folder / "again.bin") == file_bytes(path));
    }
  }
  // The loader draws its windows from a numpy-written shard.
  const std::vector<std::uint32_t> tokens = write_with_numpy(folder / "train.bin", "gpt-2", 20000, 50257);
  const TokenLoader loader({.train = {(folder / "train.bin").string()}}, 50257, 64);
  const TokenWindows batch = loader.random_windows(Split::train, 1, {.step = 3, .batch_rows = 8});
  for (std::size_t r = 0; r < batch.rows; ++r) {
    const auto* row = &batch.ids[r * batch.width];
    const auto at = std::find(tokens.begin(), tokens.end(), static_cast<std::uint32_t>(row[0]));  // tokens are distinct
    BOOST_REQUIRE(at != tokens.end());
    for (std::size_t t = 0; t < batch.width; ++t) BOOST_CHECK_EQUAL(row[t], at[t]);
  }
}

BOOST_AUTO_TEST_CASE(a_streamed_shard_reads_back_and_round_trips_a_text) {
  const fs::path folder = fresh_folder("test-shards", "stream");
  // More than the writer's buffer, in uneven writes.
  std::vector<std::uint32_t> tokens;
  ShardWriter writer((folder / "big.bin").string(), 50257);
  BOOST_CHECK(writer.format() == ShardFormat::gpt2);
  for (std::uint32_t part = 0; tokens.size() < 1'500'000; ++part) {
    std::vector<std::uint32_t> some(1000 + part * 37 % 90000);
    for (std::size_t i = 0; i < some.size(); ++i) some[i] = static_cast<std::uint32_t>((tokens.size() + i) % 50257);
    writer.write(some);
    tokens.insert(tokens.end(), some.begin(), some.end());
    BOOST_CHECK(!fs::exists(folder / "big.bin"));
  }
  BOOST_CHECK_EQUAL(writer.tokens_written(), tokens.size());
  writer.commit();
  const TokenShard shard((folder / "big.bin").string(), 50257);
  BOOST_REQUIRE_EQUAL(shard.size(), tokens.size());
  BOOST_CHECK(all_tokens(shard) == tokens);
  std::vector<std::int64_t> some(5);
  shard.read(shard.size() - 5, some);
  for (std::size_t i = 0; i < 5; ++i) BOOST_CHECK_EQUAL(some[i], tokens[tokens.size() - 5 + i]);
  check_error([&] { shard.read(shard.size() - 4, some); }, {"big.bin", "pass the end"});

  // A text through a trained tokenizer, a shard and back.
  const std::string text = "In the beginning God created the heaven and the earth. And the earth was without form.";
  const TrainedVocabulary trained = train_bpe(text, {.vocabulary_size = 300, .special_tokens = {"<|endoftext|>"}});
  std::vector<TokenId> ids = trained.tokenizer.encode_ordinary(text);
  ids.push_back(*trained.tokenizer.find_special("<|endoftext|>"));
  write_shard(folder / "text.bin", ids, trained.tokenizer.vocabulary_size());
  const TokenShard text_shard((folder / "text.bin").string(), trained.tokenizer.vocabulary_size());
  const std::vector<std::uint32_t> back = all_tokens(text_shard);
  BOOST_CHECK_EQUAL(trained.tokenizer.decode(back), text + "<|endoftext|>");
}

BOOST_AUTO_TEST_CASE(the_format_follows_the_vocabulary) {
  BOOST_CHECK(shard_format_for(256) == ShardFormat::gpt2);
  BOOST_CHECK(shard_format_for(50257) == ShardFormat::gpt2);
  BOOST_CHECK(shard_format_for(65536) == ShardFormat::gpt2);  // ids to 65,535 fit 16 bits
  BOOST_CHECK(shard_format_for(65537) == ShardFormat::llama3);
  BOOST_CHECK(shard_format_for(128256) == ShardFormat::llama3);
  BOOST_CHECK_EQUAL(token_width(ShardFormat::gpt2), 2u);
  BOOST_CHECK_EQUAL(token_width(ShardFormat::llama3), 4u);
  const fs::path folder = fresh_folder("test-shards", "formats");
  // llama3 on request, for any vocabulary; gpt2 only where the ids fit.
  ShardWriter wide((folder / "wide.bin").string(), 1000, ShardFormat::llama3);
  wide.write(std::vector<std::uint32_t>{999, 0});
  wide.commit();
  BOOST_CHECK(TokenShard((folder / "wide.bin").string(), 1000).format() == ShardFormat::llama3);
  check_error([&] { ShardWriter((folder / "x.bin").string(), 65537, ShardFormat::gpt2); },
              {"token shard '", "x.bin", "a vocabulary of 65537 tokens does not fit gpt2", "llama3"});
  check_error([&] { ShardWriter((folder / "x.bin").string(), 0); }, {"x.bin", "the vocabulary size is 0"});
  BOOST_CHECK(!fs::exists(folder / "x.bin"));
}

// ---- the writer's refusals ---------------------------------------------------------

BOOST_AUTO_TEST_CASE(the_writer_refuses_ids_past_the_vocabulary_and_makes_nothing) {
  const fs::path folder = fresh_folder("test-shards", "refusals");
  const std::string path = (folder / "out.bin").string();
  struct Case {
    std::size_t vocabulary_size;
    std::vector<std::uint32_t> first, second;
    std::string id, position;
  };
  for (const Case& c : std::vector<Case>{{300, {1, 2, 3}, {4, 300, 5}, "token 300", "position 4"},
                                         {50257, {}, {50257}, "token 50257", "position 0"},
                                         {65536, {65535}, {65536, 70000}, "token 65536", "position 1"},
                                         {128256, ramp(10), {5, 6, 4000000000u}, "token 4000000000", "position 12"}}) {
    BOOST_TEST_CONTEXT(c.id) {
      {
        ShardWriter writer(path, c.vocabulary_size);
        writer.write(c.first);
        check_error([&] { writer.write(c.second); },
                    {"token shard '" + path + "'", c.id, c.position,
                     "past the vocabulary, whose size is " + std::to_string(c.vocabulary_size)});
        BOOST_CHECK_EQUAL(writer.tokens_written(), c.first.size());  // nothing of the refused call
        check_error([&] { writer.write(std::vector<std::uint32_t>{0}); }, {"after a refused write"});
        check_error([&] { writer.commit(); }, {"after a refused write"});
      }
      BOOST_CHECK(!fs::exists(path));
      BOOST_CHECK(fs::is_empty(folder));  // no temporary left either
    }
  }
  // An empty shard is refused: llm.c's loader refuses one.
  {
    ShardWriter writer(path, 300);
    check_error([&] { writer.commit(); }, {"out.bin", "holds no tokens"});
  }
  BOOST_CHECK(fs::is_empty(folder));
  // Abandoned: the old shard stays as it was.
  write_shard(path, {1, 2, 3}, 300);
  const std::string old_bytes = file_bytes(path);
  {
    ShardWriter writer(path, 300);
    writer.write(std::vector<std::uint32_t>{9, 9, 9, 9});
  }
  BOOST_CHECK(file_bytes(path) == old_bytes);
}

// ---- every class of bad shard --------------------------------------------------------

BOOST_AUTO_TEST_CASE(every_class_of_bad_shard_is_refused_naming_the_file_and_the_numbers) {
  const fs::path folder = fresh_folder("test-shards", "bad");
  struct Case {
    std::string name, bytes;
    std::vector<std::string> message;
  };
  const std::string good = shard_bytes(20240520, 1, 4, {1, 2, 3, 4}, 2);
  std::string nanogpt;  // nanoGPT's train.bin: uint16 tokens, no header
  for (std::uint32_t i = 0; i < 1000; ++i) append_le(nanogpt, 10 + i % 5000, 2);
  const std::vector<Case> cases = {
      // shorter than the header
      {"empty", "", {"the file is 0 bytes, shorter than the 1024-byte header"}},
      {"ten-bytes", good.substr(0, 10), {"the file is 10 bytes, shorter than the 1024-byte header"}},
      {"header-cut", good.substr(0, 1023), {"1023 bytes, shorter than the 1024-byte header"}},
      // the magic
      {"zero-magic", shard_bytes(0, 1, 4, {1, 2, 3, 4}, 2), {"the magic number is 0", "20240520", "20240801"}},
      {"next-magic", shard_bytes(20240521, 1, 4, {1, 2, 3, 4}, 2), {"the magic number is 20240521"}},
      {"big-endian", shard_bytes(-1999096831, 0x01000000, 4, {1, 2, 3, 4}, 2), {"the magic number is -1999096831"}},
      {"nanogpt", nanogpt, {"the magic number is 720906", "not a token shard"}},
      // the version
      {"gpt2-v7",
       shard_bytes(20240520, 7, 4, {1, 2, 3, 4}, 2),
       {"the version is 7", "magic 20240520 goes with version 1"}},
      {"gpt2-v0", shard_bytes(20240520, 0, 4, {1, 2, 3, 4}, 2), {"the version is 0"}},
      {"gpt2-v2", shard_bytes(20240520, 2, 4, {1, 2, 3, 4}, 2), {"the version is 2"}},
      {"llama3-v1",
       shard_bytes(20240801, 1, 4, {1, 2, 3, 4}, 4),
       {"the version is 1", "magic 20240801 goes with version 7"}},
      // the count
      {"count-zero", shard_bytes(20240520, 1, 0, {}, 2), {"token count is 0", "at least one token"}},
      {"count-negative", shard_bytes(20240520, 1, -5, {1, 2}, 2), {"token count is -5"}},
      {"cut-byte",
       good.substr(0, good.size() - 1),
       {"the file is 1031 bytes", "4 tokens of 2 bytes make 1032 (1024 + 4 x 2)", "1 bytes are missing", "cut short"}},
      {"cut-tokens",
       shard_bytes(20240520, 1, 100, ramp(98), 2),
       {"the file is 1220 bytes", "100 tokens of 2 bytes make 1224", "4 bytes are missing"}},
      {"cut-llama3",
       shard_bytes(20240801, 7, 10, ramp(9), 4),
       {"the file is 1060 bytes", "10 tokens of 4 bytes make 1064", "4 bytes are missing"}},
      {"extra-byte", good + "x", {"the file is 1033 bytes", "1 bytes follow the tokens"}},
      {"extra-token", shard_bytes(20240520, 1, 4, ramp(5), 2), {"1034 bytes", "2 bytes follow the tokens"}},
      {"gpt2-as-llama3",
       shard_bytes(20240801, 7, 4, {1, 2, 3, 4}, 2),
       {"4 tokens of 4 bytes make 1040", "8 bytes are missing"}},
      // ids past the vocabulary (300 below): the first one named, with its position
      {"past-first",
       shard_bytes(20240520, 1, 3, {300, 1, 2}, 2),
       {"token 300 at position 0 (of 3) is past the vocabulary, whose size is 300"}},
      {"past-middle", shard_bytes(20240520, 1, 5, {1, 2, 65535, 400, 2}, 2), {"token 65535 at position 2 (of 5)"}},
      {"past-last", shard_bytes(20240801, 7, 3, {1, 2, 4000000000u}, 4), {"token 4000000000 at position 2 (of 3)"}},
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.name) {
      const fs::path path = folder / (c.name + ".bin");
      put_file(path, c.bytes);
      try {
        TokenShard shard(path.string(), 300);
        BOOST_ERROR("no error for " << c.name);
      } catch (const Error& e) {
        const std::string message = e.what();
        BOOST_CHECK_MESSAGE(message.find("token shard '" + path.string() + "'") == 0, message);
        for (const std::string& part : c.message)
          BOOST_CHECK_MESSAGE(message.find(part) != std::string::npos,
                              "\"" << message << "\" lacks \"" << part << "\"");
      }
    }
  }
  // Not a file at all.
  const fs::path fifo = folder / "pipe";
  BOOST_REQUIRE_EQUAL(::mkfifo(fifo.c_str(), 0600), 0);
  check_error([&] { TokenShard(folder.string(), 300); }, {"token shard", folder.string(), "is a folder"});
  check_error([&] { TokenShard(fifo.string(), 300); }, {"token shard", "is a FIFO"});
  check_error([&] { TokenShard((folder / "missing.bin").string(), 300); }, {"missing.bin", "cannot open"});
}

BOOST_AUTO_TEST_CASE(the_first_id_past_the_vocabulary_is_named_on_any_thread_count) {
  // Three million tokens, read in chunks on the pool: offenders in the second and third
  // chunks, the first named whatever the thread count.
  const fs::path folder = fresh_folder("test-shards", "far");
  std::vector<std::uint32_t> tokens(3'000'000, 7);
  tokens[2'500'000] = 60000;
  tokens[1'200'345] = 50257;
  put_file(folder / "far.bin", shard_bytes(20240520, 1, 3'000'000, tokens, 2));
  for (const int threads : {1, 2, 3}) {
    set_num_threads(threads);
    check_error([&] { TokenShard((folder / "far.bin").string(), 50257); },
                {"token 50257 at position 1200345 (of 3000000)"});
  }
  set_num_threads(2);
  BOOST_CHECK_EQUAL(TokenShard((folder / "far.bin").string(), 60001).size(), 3'000'000u);
}

// ---- the loader ------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(philox_gives_random123s_known_answers) {
  using text::detail::philox4x32_10;
  using text::detail::PhiloxBlock;
  BOOST_CHECK((philox4x32_10({0, 0, 0, 0}, {0, 0}) == PhiloxBlock{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  BOOST_CHECK(
      (philox4x32_10({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}) == PhiloxBlock{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  BOOST_CHECK((philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
               PhiloxBlock{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

namespace {

// Shards whose tokens say where they are: shard k holds k * 1,000,000 + i at position i.
constexpr std::size_t kWide = 10'000'000;
std::vector<std::string> position_shards(const fs::path& folder, const std::vector<std::size_t>& lengths) {
  std::vector<std::string> paths;
  for (std::size_t k = 0; k < lengths.size(); ++k) {
    paths.push_back((folder / ("shard" + std::to_string(k) + ".bin")).string());
    write_shard(paths.back(), ramp(lengths[k], static_cast<std::uint32_t>(k * 1'000'000)), kWide);
  }
  return paths;
}

struct Place {
  std::size_t shard, start;
};

// Where a row came from; checks it is consecutive tokens of one shard.
Place place_of(const TokenWindows& windows, std::size_t row) {
  const std::int64_t* ids = &windows.ids[row * windows.width];
  for (std::size_t t = 1; t < windows.width; ++t) BOOST_REQUIRE_EQUAL(ids[t], ids[0] + static_cast<std::int64_t>(t));
  return {static_cast<std::size_t>(ids[0] / 1'000'000), static_cast<std::size_t>(ids[0] % 1'000'000)};
}

}  // namespace

BOOST_AUTO_TEST_CASE(windows_are_a_pure_function_of_seed_step_and_row) {
  const fs::path folder = fresh_folder("test-shards", "pure");
  const std::vector<std::string> paths = position_shards(folder, {5000, 7000, 3000});
  const TokenLoader loader({.train = paths}, kWide, 32), again({.train = paths}, kWide, 32);
  const MicroBatch step5{.step = 5, .batch_rows = 16};
  const TokenWindows first = loader.random_windows(Split::train, 42, step5);
  BOOST_CHECK_EQUAL(first.rows, 16u);
  BOOST_CHECK_EQUAL(first.width, 33u);
  BOOST_CHECK_EQUAL(first.ids.size(), 16u * 33u);
  loader.random_windows(Split::train, 42, {.step = 9, .batch_rows = 16});  // other draws between: no state
  BOOST_CHECK(loader.random_windows(Split::train, 42, step5).ids == first.ids);
  BOOST_CHECK(again.random_windows(Split::train, 42, step5).ids == first.ids);  // a resumed run's loader
  set_num_threads(1);
  BOOST_CHECK(again.random_windows(Split::train, 42, step5).ids == first.ids);
  set_num_threads(2);
  // Another seed, step or split draws other windows.
  BOOST_CHECK(loader.random_windows(Split::train, 43, step5).ids != first.ids);
  BOOST_CHECK(loader.random_windows(Split::train, 42, {.step = 6, .batch_rows = 16}).ids != first.ids);
  BOOST_CHECK(loader.random_windows(Split::validation, 42, step5).ids != first.ids);
  // Rows within a batch differ.
  std::set<std::int64_t> starts;
  for (std::size_t r = 0; r < first.rows; ++r) starts.insert(first.ids[r * first.width]);
  BOOST_CHECK_GT(starts.size(), 12u);
}

BOOST_AUTO_TEST_CASE(micro_batches_tile_the_global_batch_exactly) {
  const fs::path folder = fresh_folder("test-shards", "tile");
  const std::vector<std::string> paths = position_shards(folder, {4000, 9000});
  const TokenLoader loader({.train = paths}, kWide, 16);
  for (const std::uint64_t step : {0u, 1u, 1000u}) {
    const TokenWindows whole = loader.random_windows(Split::train, 7, {.step = step, .batch_rows = 24});
    for (const std::size_t micro_batches : {1u, 2u, 3u, 4u, 6u, 8u, 12u, 24u}) {
      std::vector<std::int64_t> tiled;
      for (std::size_t m = 0; m < micro_batches; ++m) {
        const TokenWindows part = loader.random_windows(
            Split::train, 7, {.step = step, .batch_rows = 24, .micro = m, .micro_batches = micro_batches});
        BOOST_CHECK_EQUAL(part.rows, 24 / micro_batches);
        tiled.insert(tiled.end(), part.ids.begin(), part.ids.end());
      }
      BOOST_CHECK_MESSAGE(tiled == whole.ids, "step " << step << ", " << micro_batches << " micro-batches");
    }
    // Two ranks accumulating two micro-batches each are four micro-batches of the batch.
    std::vector<std::int64_t> ranks;
    for (std::size_t rank = 0; rank < 2; ++rank)
      for (std::size_t accum = 0; accum < 2; ++accum) {
        const TokenWindows part = loader.random_windows(
            Split::train, 7, {.step = step, .batch_rows = 24, .micro = rank * 2 + accum, .micro_batches = 4});
        ranks.insert(ranks.end(), part.ids.begin(), part.ids.end());
      }
    BOOST_CHECK(ranks == whole.ids);
  }
}

BOOST_AUTO_TEST_CASE(one_shard_splits_at_its_last_tenth_and_windows_stay_on_their_side) {
  const fs::path folder = fresh_folder("test-shards", "one");
  const std::vector<std::string> paths = position_shards(folder, {1000});
  const TokenLoader loader({.train = paths}, kWide, 16);
  BOOST_CHECK_EQUAL(loader.tokens(Split::train), 900u);
  BOOST_CHECK_EQUAL(loader.tokens(Split::validation), 100u);
  BOOST_CHECK_EQUAL(loader.window_starts(Split::train), 900u - 16u);
  BOOST_CHECK_EQUAL(loader.window_starts(Split::validation), 100u - 16u);
  BOOST_CHECK_EQUAL(loader.describe(Split::validation), "tokens 900 to 1000 of '" + paths[0] + "' (100 tokens)");
  std::map<Split, std::set<std::size_t>> seen;
  for (const Split split : {Split::train, Split::validation})
    for (std::uint64_t step = 0; step < 200; ++step) {
      const TokenWindows batch = loader.random_windows(split, 3, {.step = step, .batch_rows = 64});
      for (std::size_t r = 0; r < batch.rows; ++r) seen[split].insert(place_of(batch, r).start);
    }
  // Every start of each side is drawn (12,800 draws over 884 and 84 starts), and none past it.
  BOOST_CHECK_EQUAL(seen[Split::train].size(), 884u);
  BOOST_CHECK_EQUAL(*seen[Split::train].begin(), 0u);
  BOOST_CHECK_EQUAL(*seen[Split::train].rbegin(), 900u - 17u);  // its window ends at token 900
  BOOST_CHECK_EQUAL(seen[Split::validation].size(), 84u);
  BOOST_CHECK_EQUAL(*seen[Split::validation].begin(), 900u);
  BOOST_CHECK_EQUAL(*seen[Split::validation].rbegin(), 1000u - 17u);
}

BOOST_AUTO_TEST_CASE(several_shards_split_at_the_last_or_as_given_weighted_by_their_windows) {
  const fs::path folder = fresh_folder("test-shards", "several");
  const std::vector<std::string> paths = position_shards(folder, {1016, 3016, 20, 516});
  // No validation given: the last shard is it. The 20-token shard holds 4 windows of 17.
  const TokenLoader loader({.train = paths}, kWide, 16);
  BOOST_CHECK_EQUAL(loader.tokens(Split::train), 1016u + 3016u + 20u);
  BOOST_CHECK_EQUAL(loader.window_starts(Split::train), 1000u + 3000u + 4u);
  BOOST_CHECK_EQUAL(loader.describe(Split::validation), "'" + paths[3] + "' (516 tokens)");
  std::map<std::size_t, std::size_t> per_shard;
  const std::size_t draws = 40000;
  for (std::uint64_t step = 0; step < draws / 100; ++step) {
    const TokenWindows batch = loader.random_windows(Split::train, 11, {.step = step, .batch_rows = 100});
    for (std::size_t r = 0; r < batch.rows; ++r) {
      const Place place = place_of(batch, r);
      BOOST_REQUIRE_LE(place.start + 17, std::vector<std::size_t>({1016, 3016, 20})[place.shard]);
      ++per_shard[place.shard];
    }
    const TokenWindows validation = loader.random_windows(Split::validation, 11, {.step = step, .batch_rows = 4});
    for (std::size_t r = 0; r < validation.rows; ++r) BOOST_REQUIRE_EQUAL(place_of(validation, r).shard, 3u);
  }
  // Uniform over the 4,004 starts: shard 0 holds 1,000 of them, shard 1 3,000, shard 2 4.
  BOOST_CHECK_CLOSE_FRACTION(per_shard[0] / double(draws), 1000.0 / 4004, 0.05);
  BOOST_CHECK_CLOSE_FRACTION(per_shard[1] / double(draws), 3000.0 / 4004, 0.02);
  BOOST_CHECK_LT(per_shard[2], 100u);

  // Validation shards given: they are the validation split, all the rest trains.
  const TokenLoader given({.train = {paths[0], paths[1]}, .validation = {paths[3], paths[2]}}, kWide, 16);
  BOOST_CHECK_EQUAL(given.tokens(Split::train), 1016u + 3016u);
  BOOST_CHECK_EQUAL(given.tokens(Split::validation), 516u + 20u);
  const TokenWindows batch = given.random_windows(Split::validation, 1, {.step = 0, .batch_rows = 50});
  for (std::size_t r = 0; r < batch.rows; ++r) BOOST_CHECK_GE(place_of(batch, r).shard, 2u);
}

BOOST_AUTO_TEST_CASE(a_loaders_fingerprint_follows_the_tokens_and_the_splits_not_the_names) {
  const fs::path folder = fresh_folder("test-shards", "fingerprint");
  const std::vector<std::string> paths = position_shards(folder, {1016, 3016, 516});
  const TokenShard first(paths[0], kWide);
  BOOST_CHECK_EQUAL(first.fingerprint(), fingerprint(read_regular_file(paths[0], "test")));
  const std::uint64_t as_given = TokenLoader({.train = paths}, kWide, 16).fingerprint();
  // The same bytes under other names: the same.
  std::vector<std::string> copies;
  for (std::size_t k = 0; k < paths.size(); ++k) {
    copies.push_back((folder / ("copy" + std::to_string(k) + ".bin")).string());
    fs::copy_file(paths[k], copies.back());
  }
  BOOST_CHECK_EQUAL(TokenLoader({.train = copies}, kWide, 16).fingerprint(), as_given);
  // The shards in another order, split otherwise, or one token changed in place: not.
  std::set<std::uint64_t> seen{as_given};
  BOOST_CHECK(seen.insert(TokenLoader({.train = {paths[1], paths[0], paths[2]}}, kWide, 16).fingerprint()).second);
  BOOST_CHECK(
      seen.insert(TokenLoader({.train = {paths[0]}, .validation = {paths[1], paths[2]}}, kWide, 16).fingerprint())
          .second);
  BOOST_CHECK(seen.insert(TokenLoader({.train = {paths[0], paths[1]}}, kWide, 16).fingerprint()).second);
  write_shard(
      copies[1],
      [] {
        std::vector<std::uint32_t> tokens = ramp(3016, 1'000'000);
        std::swap(tokens[7], tokens[8]);
        return tokens;
      }(),
      kWide);
  BOOST_CHECK(seen.insert(TokenLoader({.train = copies}, kWide, 16).fingerprint()).second);
}

BOOST_AUTO_TEST_CASE(shards_of_both_widths_load_together) {
  const fs::path folder = fresh_folder("test-shards", "widths");
  const std::string narrow = (folder / "narrow.bin").string(), wide = (folder / "wide.bin").string();
  write_shard(narrow, ramp(500), 1000);  // gpt2
  ShardWriter writer(wide, 1000, ShardFormat::llama3);
  writer.write(ramp(500, 500));
  writer.commit();
  const TokenLoader loader({.train = {narrow}, .validation = {wide}}, 1000, 8);
  for (const Split split : {Split::train, Split::validation}) {
    const TokenWindows windows = loader.evaluation_windows(split, 0, 3);
    for (std::size_t r = 0; r < 3; ++r)
      for (std::size_t t = 0; t < 9; ++t)
        BOOST_CHECK_EQUAL(windows.ids[r * 9 + t], (split == Split::train ? 0 : 500) + static_cast<int>(r * 8 + t));
  }
  // A vocabulary too small for the ids in a shard: that shard is named.
  check_error([&] { TokenLoader({.train = {narrow}, .validation = {wide}}, 600, 8); },
              {"wide.bin", "token 600 at position 100", "whose size is 600"});
}

BOOST_AUTO_TEST_CASE(evaluation_windows_are_fixed_and_cover_each_shard_in_order) {
  const fs::path folder = fresh_folder("test-shards", "evaluation");
  const std::vector<std::string> paths = position_shards(folder, {2000, 100, 41, 16});
  const TokenLoader loader({.train = {paths[0]}, .validation = {paths[1], paths[2], paths[3]}}, kWide, 10);
  // (100 - 1) / 10 = 9 windows, (41 - 1) / 10 = 4, and none from 16 tokens.
  BOOST_REQUIRE_EQUAL(loader.evaluation_window_count(Split::validation), 9u + 4u + 1u);
  BOOST_CHECK_EQUAL(loader.evaluation_window_count(Split::train), 1999u / 10u);
  const TokenWindows all = loader.evaluation_windows(Split::validation, 0, 14);
  const std::vector<Place> expected = {{1, 0},  {1, 10}, {1, 20}, {1, 30}, {1, 40}, {1, 50}, {1, 60},
                                       {1, 70}, {1, 80}, {2, 0},  {2, 10}, {2, 20}, {2, 30}, {3, 0}};
  for (std::size_t r = 0; r < 14; ++r) {
    const Place place = place_of(all, r);
    BOOST_CHECK_EQUAL(place.shard, expected[r].shard);
    BOOST_CHECK_EQUAL(place.start, expected[r].start);
  }
  // Any stretch of them is the same windows, every call.
  const TokenWindows some = loader.evaluation_windows(Split::validation, 8, 3);
  BOOST_CHECK(std::vector<std::int64_t>(all.ids.begin() + 8 * 11, all.ids.begin() + 11 * 11) == some.ids);
  BOOST_CHECK(loader.evaluation_windows(Split::validation, 8, 3).ids == some.ids);
  BOOST_CHECK_EQUAL(loader.evaluation_windows(Split::validation, 14, 0).rows, 0u);
  check_error([&] { loader.evaluation_windows(Split::validation, 10, 5); },
              {"token loader", "evaluation windows 10 to 15 of the validation split", "it has 14"});
}

BOOST_AUTO_TEST_CASE(the_loaders_refusals_name_what_is_wrong) {
  const fs::path folder = fresh_folder("test-shards", "loader-refusals");
  const std::vector<std::string> paths = position_shards(folder, {100, 30, 10, 200});
  check_error([&] { TokenLoader({}, kWide, 16); }, {"token loader", "no training shard"});
  check_error([&] { TokenLoader({.train = {paths[0]}}, kWide, 0); }, {"seq_len is 0"});
  // One shard too short for its validation tenth: 10 tokens, a window of 17.
  check_error([&] { TokenLoader({.train = {paths[0]}}, kWide, 16); },
              {"the validation split, tokens 90 to 100 of '" + paths[0] + "' (10 tokens)",
               "has no window of 17 tokens (seq_len 16 + 1) within one shard"});
  // Training shards all too short.
  check_error(
      [&] {
        TokenLoader({.train = {paths[1], paths[2], paths[3]}}, kWide, 40);
      },
      {"the training split, '" + paths[1] + "' (30 tokens), '" + paths[2] + "' (10 tokens)", "no window of 41 tokens"});
  check_error([&] { TokenLoader({.train = {paths[3]}, .validation = {paths[2]}}, kWide, 16); },
              {"the validation split, '" + paths[2] + "' (10 tokens)"});
  // Many shards too short: the first ten named, the rest counted (a corpus of small
  // shards made a message of megabytes).
  const fs::path many_folder = fresh_folder("test-shards", "many-short");
  std::vector<std::string> many;
  for (int k = 0; k < 24; ++k) {
    many.push_back((many_folder / ("short" + std::to_string(k) + ".bin")).string());
    write_shard(many.back(), ramp(5), kWide);
  }
  check_error([&] { TokenLoader({.train = many, .validation = {paths[3]}}, kWide, 16); },
              {"'" + many[9] + "' (5 tokens) and 14 more, has no window of 17 tokens"});
  // A shard given twice.
  check_error(
      [&] {
        TokenLoader({.train = {paths[3], paths[0], paths[3]}}, kWide, 16);
      },
      {"the shard '" + paths[3] + "' is given twice"});
  check_error([&] { TokenLoader({.train = {paths[3]}, .validation = {paths[3]}}, kWide, 16); },
              {"given twice (for training and for validation)"});
  // One file under two names: a "./" more, a symbolic link.
  const std::string dotted = (folder / "." / fs::path(paths[3]).filename()).string(),
                    link = (folder / "link.bin").string();
  fs::create_symlink(paths[3], link);
  for (const std::string& other : {dotted, link})
    check_error(
        [&] {
          TokenLoader({.train = {paths[3], paths[0]}, .validation = {other}}, kWide, 16);
        },
        {"the shard '" + other + "' (the file '" + paths[3] + "') is given twice",
         "(for training and for validation)"});
  check_error([&] { TokenLoader({.train = {(folder / "none.bin").string()}}, kWide, 16); },
              {"none.bin", "cannot open"});
  // Bad micro-batches.
  const TokenLoader loader({.train = {paths[3], paths[0]}}, kWide, 16);
  check_error([&] { loader.random_windows(Split::train, 0, {.step = 0, .batch_rows = 0}); }, {"batch_rows is 0"});
  check_error([&] { loader.random_windows(Split::train, 0, {.step = 0, .batch_rows = 10, .micro_batches = 4}); },
              {"micro_batches is 4, which does not divide batch_rows 10"});
  check_error([&] { loader.random_windows(Split::train, 0, {.step = 0, .batch_rows = 10, .micro_batches = 0}); },
              {"micro_batches is 0"});
  check_error(
      [&] { loader.random_windows(Split::train, 0, {.step = 0, .batch_rows = 10, .micro = 2, .micro_batches = 2}); },
      {"micro is 2, not below micro_batches 2"});
}
