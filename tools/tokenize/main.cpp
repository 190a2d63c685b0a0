// xgrad-tokenize: texts into token shards in llm.c's format, which xgrad-train --task lm
// reads. It trains a byte-level BPE vocabulary on the texts' training parts (or takes
// one), cuts each text into a training part and a validation part (its last
// --val-fraction), and writes each part as llm.c's scripts write a document: the
// <|endoftext|> token, then the part's tokens.
//
//   xgrad-tokenize --text data/kjv.txt --vocab-size 8192 --out data/kjv
//   xgrad-tokenize --text a.txt,b.txt --tokenizer data/kjv --out data/ab

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "cli.hpp"
#include "config.hpp"
#include "flags.hpp"
#include "output.hpp"
#include "progress_bar.hpp"
#include "tokenizer_files.hpp"
#include "xgrad/autograd/files.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/text/bpe_trainer.hpp"
#include "xgrad/text/pretokenizer.hpp"
#include "xgrad/text/vocabulary_files.hpp"

using namespace xgrad;
using tools::flag;
using tools::tokenize::OutputFolder;
using tools::tokenize::ProgressBar;
using tools::tokenize::ShardSeries;

namespace {

constexpr const char* kEndOfText = "<|endoftext|>";
// The smallest vocabulary trained: the 256 single bytes and <|endoftext|>.
constexpr std::size_t kLeastVocabulary = 257;
// Texts of this many bytes or more get a progress bar (where stderr is a terminal).
constexpr std::uint64_t kLongInput = std::uint64_t{4} << 20;

// Ctrl-C or SIGTERM ends the run at the next stretch it encodes, by an Interrupted that
// empties the output folder as any failure does. A second signal a second or more later
// ends it at once; one sooner is the same request again (`timeout` signals its child and
// then its process group, so the child gets it twice).
volatile std::sig_atomic_t interrupted = 0;
timespec first_interrupt{};

void on_interrupt(int signal) {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
  if (!interrupted) {
    first_interrupt = now;
    interrupted = signal;
  } else if (now.tv_sec - first_interrupt.tv_sec >= 2 ||
             (now.tv_sec - first_interrupt.tv_sec == 1 && now.tv_nsec >= first_interrupt.tv_nsec)) {
    if (xgrad::signal_deferred(signal)) return;
    xgrad::remove_unfinished_outputs();
    std::signal(signal, SIG_DFL);
    std::raise(signal);
  }
}

struct Interrupted : std::runtime_error {
  int signal;
  explicit Interrupted(int signal)
      : std::runtime_error(
            str("interrupted by ", signal == SIGINT ? "SIGINT" : "SIGTERM", ": the files written are removed")),
        signal(signal) {}
};

void stop_if_interrupted() {
  if (interrupted) throw Interrupted(interrupted);
}

struct TokenizeOptions {
  std::string text, tokenizer, out;
  std::size_t vocab_size = 0, shard_tokens = 0;
  double val_fraction = 0;
  int threads = 0;
};

// xgrad-tokenize's table: one row per flag (tools/common/settings.hpp).
tools::Settings<TokenizeOptions> settings_table(std::type_identity<TokenizeOptions>) {
  using namespace tools::setting;
  using O = TokenizeOptions;
  return {"xgrad-tokenize",
          Text::of("trains a byte-level BPE vocabulary on texts (or takes one) and encodes them into token shards in "
                   "llm.c's format, for xgrad-train ",
                   &tools::Config::task, " lm.\nExample: xgrad-tokenize ", &O::text, " data/kjv.txt ", &O::vocab_size,
                   " 8192 ", &O::out, " data/kjv"),
          {
              bind(&O::text, flags::text())
                  .help("the texts, files joined by commas: each is a document, its last ", &O::val_fraction,
                        " of bytes validation text")
                  .required(),
              whole(&O::vocab_size, "vocab-size")
                  .help("train a vocabulary of N tokens on the training text: the 256 bytes, merges, and ", kEndOfText,
                        " as the last id (at least 257; this or ", &O::tokenizer, ")"),
              bind(&O::tokenizer, flags::tokenizer())
                  .help("encode with this vocabulary, which must hold ", kEndOfText,
                        ": a folder holding encoder.json and vocab.bpe (or vocab.json and merges.txt), the two files "
                        "joined by a comma, or a tiktoken rank file (this or ",
                        &O::vocab_size, ")"),
              bind(&O::out, flags::out())
                  .help("the folder to write, made if absent: encoder.json, vocab.bpe, train_000000.bin, ..., "
                        "val_000000.bin, ...; refused if it holds any of them or any other .bin")
                  .required(),
              real(&O::val_fraction, "val-fraction")
                  .help("the last fraction of each text's bytes that is validation text, (0, 0.5]; the cut moves on to "
                        "the first place where the text's tokens allow one")
                  .above(0)
                  .at_most(0.5)
                  .fallback(0.1),
              whole(&O::shard_tokens, "shard-tokens")
                  .help("the most tokens a shard holds")
                  .at_least(1)
                  .at_most(static_cast<double>(xgrad::text::kMaxShardTokens))
                  .fallback(100'000'000),
              bind(&O::threads, flags::threads()).fallback(0),
          }};
}

// One text: a document. Bytes [0, cut) are its training part, [cut, end) its validation
// part, cut where GPT-2's pieces allow, so that the two parts' tokens are the whole's.
struct Document {
  std::string path;
  MappedFile file;  // mapped, not read: a corpus of many GB takes no memory of its own
  std::size_t cut = 0;

  std::string_view training() const { return file.bytes().substr(0, cut); }
  std::string_view validation() const { return file.bytes().substr(cut); }
};

// Every flag in range, and one vocabulary asked for.
void check_options(const TokenizeOptions& o, const tools::Given& given) {
  const tools::Settings<TokenizeOptions>& settings = tools::settings_of<TokenizeOptions>();
  settings.check(o);
  const tools::Flag size = flag(&TokenizeOptions::vocab_size), named = flag(&TokenizeOptions::tokenizer);
  const bool trains = settings.was_given(given, &TokenizeOptions::vocab_size),
             takes = settings.was_given(given, &TokenizeOptions::tokenizer);
  if (trains && takes)
    throw tools::UsageError(str(size, " and ", named, " are two vocabularies: give one (", size, " N trains one, ",
                                named, " FILES takes one)"));
  if (!trains && !takes)
    throw tools::UsageError(
        str("no vocabulary: give ", size, " N to train one on the texts, or ", named, " FILES to take one"));
  if (trains && o.vocab_size < kLeastVocabulary)
    throw tools::SettingError(size, str(" must be at least ", kLeastVocabulary, " (the 256 single bytes and ",
                                        kEndOfText, "), got ", o.vocab_size));
  if (trains && o.vocab_size > (std::size_t{1} << 32))
    throw tools::SettingError(size, str(" must be at most 4294967296 (ids are 32-bit), got ", o.vocab_size));
}

// The texts --text names, each mapped and cut into its two parts.
std::vector<Document> read_documents(const TokenizeOptions& o) {
  const tools::Flag text_flag = flag(&TokenizeOptions::text);
  std::vector<std::string> paths;
  for (std::size_t begin = 0;;) {
    const std::size_t comma = std::min(o.text.find(',', begin), o.text.size());
    paths.push_back(o.text.substr(begin, comma - begin));
    if (paths.back().empty())
      throw tools::SettingError(text_flag, str(" ", o.text, ": an empty file name (a comma too many)"));
    if (comma == o.text.size()) break;
    begin = comma + 1;
  }
  std::vector<Document> documents;
  for (const std::string& path : paths) {
    tools::check_input_exists(text_flag.dashed(), path);
    for (const Document& earlier : documents)
      if (earlier.path == path || xgrad::same_file(earlier.path, path))
        throw tools::SettingError(text_flag, earlier.path == path
                                                 ? str(" names ", path, " twice")
                                                 : str(" names one file twice: ", earlier.path, " and ", path));
    Document document{path, MappedFile(path, text_flag.dashed())};
    const std::string_view bytes = document.file.bytes();
    if (bytes.empty()) throw tools::SettingError(text_flag, str(" ", path, ": the file is empty"));
    // The validation part begins at the first place, at or after its last fraction, where
    // the text may be cut without changing its tokens.
    const std::size_t nominal =
        bytes.size() - static_cast<std::size_t>(static_cast<double>(bytes.size()) * o.val_fraction);
    document.cut = text::gpt2_safe_cut(bytes, nominal);
    if (document.cut >= bytes.size())
      throw tools::SettingError(
          text_flag,
          str(" ", path, ": too short for a validation part: no place at or after byte ", nominal, " of its ",
              bytes.size(), " (its last ", flag(&TokenizeOptions::val_fraction), " ", o.val_fraction,
              ") where its tokens allow a cut (an ASCII whitespace byte after a non-space ASCII byte)"));
    documents.push_back(std::move(document));
  }
  return documents;
}

// Calls `each` with consecutive stretches of `text` of about a MiB per thread, cut where
// GPT-2's pieces allow: the pieces and tokens of the stretches are the whole text's, and
// the progress bar moves once a stretch.
template <class Each>
void for_each_stretch(std::string_view text, Each&& each) {
  const std::size_t size = static_cast<std::size_t>(num_threads()) << 20;
  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t end = text.size() - begin <= size ? text.size() : text::gpt2_safe_cut(text, begin + size);
    each(text.substr(begin, end - begin));
    begin = end;
  }
}

// The vocabulary the run encodes with, and the report's line about it.
struct Vocabulary {
  text::Tokenizer tokenizer;
  std::string said;
};

Vocabulary given_vocabulary(const TokenizeOptions& o) {
  const tools::Flag tokenizer_flag = flag(&TokenizeOptions::tokenizer);
  tools::NamedTokenizer named = tools::read_tokenizer(o.tokenizer, tokenizer_flag.dashed());
  const std::optional<text::TokenId> end_of_text = named.tokenizer.find_special(kEndOfText);
  if (!end_of_text)
    throw tools::SettingError(tokenizer_flag, str(" ", o.tokenizer, ": the vocabulary has no ", kEndOfText,
                                                  " token, which begins every document in the shards"));
  // What the run ends with, checked before any work: shards xgrad-train can learn, and the
  // vocabulary as encoder.json and vocab.bpe (a tiktoken rank file need not be a merge list).
  tools::check_trainable(named, str(tokenizer_flag, " ", o.tokenizer));
  try {
    text::format_gpt2_vocabulary(named.tokenizer);
  } catch (const Error& e) {
    throw tools::SettingError(tokenizer_flag, str(" ", o.tokenizer, ": cannot be written as ", tools::kEncoderFile,
                                                  " and ", tools::kMergesFile, " (", e.what(), ")"));
  }
  return {named.tokenizer, str(tools::describe(named), ": ", named.tokenizer.vocabulary_size(), " tokens, ", kEndOfText,
                               " ", *end_of_text)};
}

// A vocabulary learned from the training parts alone: the validation text stays unseen,
// by the vocabulary as by the model.
Vocabulary trained_vocabulary(const TokenizeOptions& o, const std::vector<Document>& documents, ProgressBar& bar) {
  text::PieceCounts counts;
  std::uint64_t bytes = 0;
  for (const Document& document : documents) bytes += document.cut;
  bar.stage("counting pieces", bytes);
  for (const Document& document : documents)
    for_each_stretch(document.training(), [&](std::string_view stretch) {
      stop_if_interrupted();
      counts.add(stretch);
      bar.advance(stretch.size());
    });
  bar.stage(str("training ", o.vocab_size, " tokens"), 0);
  text::TrainedVocabulary trained = text::train_bpe(
      counts, {.vocabulary_size = o.vocab_size, .special_tokens = {kEndOfText}, .after_each_rank = [](std::size_t) {
                 stop_if_interrupted();
               }});
  const text::Tokenizer& t = trained.tokenizer;
  return {t, str("trained on the training parts, ", t.vocabulary_size(), " tokens (", trained.merges(),
                 " merges, stopped by ", text::stop_name(trained.stop), "), ", kEndOfText, " ",
                 *t.find_special(kEndOfText), ", identity ", t.identity().substr(0, 8))};
}

// One split: each document's part as llm.c's scripts write a document, <|endoftext|> and
// then its tokens.
struct Split {
  const char* name;  // "train", "val": the shards' names begin with it
  std::string_view (Document::*part)() const;
  std::uint64_t bytes = 0;
};

void encode_split(Split& split, const std::vector<Document>& documents, const text::Tokenizer& tokenizer,
                  ShardSeries& shards, ProgressBar& bar) {
  for (const Document& document : documents) split.bytes += (document.*split.part)().size();
  bar.stage(str("encoding ", split.name), split.bytes);
  const text::TokenId end_of_text = *tokenizer.find_special(kEndOfText);
  std::vector<text::TokenId> ids;  // a stretch's, its memory kept from stretch to stretch
  for (const Document& document : documents) {
    shards.write({&end_of_text, 1});
    for_each_stretch((document.*split.part)(), [&](std::string_view stretch) {
      stop_if_interrupted();
      ids.clear();
      tokenizer.encode_ordinary(stretch, ids);
      shards.write(ids);
      bar.advance(stretch.size());
    });
  }
  shards.finish();
}

void report_split(const Split& split, const ShardSeries& shards, std::size_t documents) {
  const std::uint64_t text_tokens = shards.tokens() - documents;  // less the <|endoftext|> of each
  std::printf("%s: %llu bytes, %llu tokens (%zu %s included), %.3f bytes per token, %zu shard%s\n", split.name,
              static_cast<unsigned long long>(split.bytes), static_cast<unsigned long long>(shards.tokens()), documents,
              kEndOfText, static_cast<double>(split.bytes) / static_cast<double>(text_tokens), shards.shards(),
              shards.shards() == 1 ? "" : "s");
}

int run(const TokenizeOptions& o) {
  const auto started = std::chrono::steady_clock::now();
  if (o.threads > 0) set_num_threads(o.threads);
  OutputFolder folder(flag(&TokenizeOptions::out), o.out, {tools::kEncoderFile, tools::kMergesFile});
  const std::vector<Document> documents = read_documents(o);
  std::uint64_t bytes = 0;
  for (const Document& document : documents) bytes += document.file.bytes().size();
  std::optional<Vocabulary> given;
  if (!o.tokenizer.empty()) given = given_vocabulary(o);
  folder.make();  // every input checked: the folder is written from here on (and emptied if the run fails)
  ProgressBar bar(bytes >= kLongInput && ::isatty(STDERR_FILENO));
  const Vocabulary vocabulary = given ? *given : trained_vocabulary(o, documents, bar);
  stop_if_interrupted();
  const text::Tokenizer& tokenizer = vocabulary.tokenizer;

  Split train{"train", &Document::training}, val{"val", &Document::validation};
  ShardSeries train_shards(folder, train.name, tokenizer.vocabulary_size(), o.shard_tokens),
      val_shards(folder, val.name, tokenizer.vocabulary_size(), o.shard_tokens);
  encode_split(train, documents, tokenizer, train_shards, bar);
  encode_split(val, documents, tokenizer, val_shards, bar);
  // The pair last: a folder that holds it is whole (and describes its shards itself).
  folder.claim(tools::kEncoderFile);
  folder.claim(tools::kMergesFile);
  tools::write_tokenizer_files(tokenizer, folder.path(), flag(&TokenizeOptions::out).dashed());
  bar.clear();

  std::printf("xgrad-tokenize: %zu text%s, %llu bytes, %d thread%s\n", documents.size(),
              documents.size() == 1 ? "" : "s", static_cast<unsigned long long>(bytes), num_threads(),
              num_threads() == 1 ? "" : "s");
  std::printf("vocabulary: %s\n", vocabulary.said.c_str());
  report_split(train, train_shards, documents.size());
  report_split(val, val_shards, documents.size());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("wrote %s: %s, %s and %zu shards in %.2f s\n", o.out.c_str(), tools::kEncoderFile, tools::kMergesFile,
              train_shards.shards() + val_shards.shards(), seconds);
  tools::check_stdout();  // a report that cannot be written fails the run, and the files go
  folder.keep();
  return 0;
}

}  // namespace

// A bad flag or input, or a failed write, is one line on stderr and exit status 2, with
// nothing left in the output folder; Ctrl-C or SIGTERM likewise, with exit status 128 +
// the signal.
int main(int argc, char** argv) {
  return tools::run_tool("xgrad-tokenize", [&] {
    TokenizeOptions o;
    tools::Given given;
    if (const std::optional<int> printed = tools::settings_of<TokenizeOptions>().parse(argc, argv, o, given))
      return *printed;
    check_options(o, given);
    std::signal(SIGINT, on_interrupt);
    std::signal(SIGTERM, on_interrupt);
    try {
      return run(o);
    } catch (const Interrupted& e) {  // the folder emptied as run() left
      std::fprintf(stderr, "xgrad-tokenize: %s\n", e.what());
      return 128 + e.signal;
    }
  });
}
