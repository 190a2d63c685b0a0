#include "tokenizer_files.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/files.hpp"
#include "xgrad/text/utf8.hpp"
#include "xgrad/text/vocabulary_files.hpp"

namespace tools {

namespace fs = std::filesystem;
namespace text = xgrad::text;
using xgrad::str;

namespace {

constexpr const char* kEndOfText = "<|endoftext|>";

// A tokenizer pair's two names: GPT-2's, then Hugging Face's.
constexpr std::pair<const char*, const char*> kPairNames[] = {{kEncoderFile, kMergesFile},
                                                              {"vocab.json", "merges.txt"}};

// The pair in a folder: GPT-2's names, else Hugging Face's.
std::optional<std::pair<std::string, std::string>> pair_in(const std::string& folder) {
  for (const auto& [encoder, merges] : kPairNames) {
    const fs::path e = fs::path(folder) / encoder, m = fs::path(folder) / merges;
    std::error_code error;
    if (fs::exists(e, error) && fs::exists(m, error)) return std::pair{e.string(), m.string()};
  }
  return std::nullopt;
}

text::Tokenizer read_pair(const std::string& encoder, const std::string& merges, const std::string& what) {
  const std::string encoder_bytes = xgrad::read_regular_file(encoder, what);
  const std::string merges_bytes = xgrad::read_regular_file(merges, what);
  return text::parse_gpt2_vocabulary({encoder, encoder_bytes}, {merges, merges_bytes});
}

text::Tokenizer read_ranks(const std::string& path, const std::string& what) {
  const std::string bytes = xgrad::read_regular_file(path, what);
  std::size_t lines = 0;
  for (const char c : bytes) lines += c == '\n';
  return text::parse_tiktoken_ranks({path, bytes}, {{kEndOfText, static_cast<text::TokenId>(lines)}});
}

}  // namespace

NamedTokenizer read_tokenizer(const std::string& spec, const std::string& what) {
  const std::string where = str(what, " ", spec);
  if (spec.empty()) throw UsageError(str(what, ": names no files"));
  try {
    if (const std::size_t comma = spec.find(','); comma != std::string::npos) {
      const std::string encoder = spec.substr(0, comma), merges = spec.substr(comma + 1);
      if (encoder.empty() || merges.empty() || merges.find(',') != std::string::npos)
        throw UsageError(str(where, ": two files joined by one comma are GPT-2's encoder.json and vocab.bpe"));
      check_input_exists(what, encoder);
      check_input_exists(what, merges);
      return {read_pair(encoder, merges, what), encoder + "," + merges};
    }
    check_input_exists(what, spec);
    std::error_code error;
    if (fs::is_directory(spec, error)) {
      const auto pair = pair_in(spec);
      if (!pair)
        throw UsageError(
            str(where, ": the folder holds neither encoder.json and vocab.bpe nor vocab.json and merges.txt"));
      NamedTokenizer named{read_pair(pair->first, pair->second, what), pair->first + "," + pair->second};
      // Both namings in one folder must be one tokenizer: which one a reader takes differs.
      const fs::path vocab = fs::path(spec) / "vocab.json", merges = fs::path(spec) / "merges.txt";
      if (pair->first != vocab.string() && fs::exists(vocab, error) && fs::exists(merges, error) &&
          read_pair(vocab.string(), merges.string(), what).identity() != named.tokenizer.identity())
        throw UsageError(str(where, ": the folder holds two tokenizers, ", kEncoderFile, " and ", kMergesFile,
                             " and another in vocab.json and merges.txt"));
      return named;
    }
    // One file of a pair is no rank file: say what to give.
    const std::string name = fs::path(spec).filename().string();
    for (const auto& [encoder, merges] : kPairNames)
      if (name == encoder || name == merges)
        throw UsageError(str(where, ": is one file of the pair ", encoder, " and ", merges,
                             ": give both, joined by a comma, or their folder"));
    return {read_ranks(spec, what), spec};
  } catch (const xgrad::Error& e) {  // the file readers' errors start with `what` already
    const std::string message = e.what();
    throw UsageError(message.starts_with(what + ": ") ? message : str(what, ": ", message));
  }
}

void write_tokenizer_files(const text::Tokenizer& tokenizer, const std::string& folder, const std::string& what) {
  const text::Gpt2Vocabulary files = text::format_gpt2_vocabulary(tokenizer);
  xgrad::write_file_atomically((fs::path(folder) / kEncoderFile).string(), files.encoder_json, what);
  xgrad::write_file_atomically((fs::path(folder) / kMergesFile).string(), files.vocab_bpe, what);
}

bool holds_tokenizer_files(const std::string& folder) { return pair_in(folder).has_value(); }

void refuse_half_pair(const std::string& folder, const std::string& what) {
  if (pair_in(folder)) return;
  for (const auto& [encoder, merges] : kPairNames) {
    std::error_code error;
    const bool has_encoder = fs::exists(fs::path(folder) / encoder, error),
               has_merges = fs::exists(fs::path(folder) / merges, error);
    if (has_encoder != has_merges)
      throw UsageError(str(what, " ", folder, ": holds ", has_encoder ? encoder : merges, " without ",
                           has_encoder ? merges : encoder, " (a tokenizer is the two files)"));
  }
}

void check_trainable(const NamedTokenizer& named, const std::string& what) {
  const text::Tokenizer& t = named.tokenizer;
  if (t.rank_count() + t.special_tokens().size() != t.vocabulary_size())
    throw UsageError(str(what, ": its ids leave gaps (", t.rank_count(), " ranks and ", t.special_tokens().size(),
                         " special tokens, the largest id ", t.vocabulary_size() - 1,
                         "): a model would draw ids that are no token"));
  for (const text::SpecialToken& special : t.special_tokens())
    if (!text::is_valid_utf8(special.text))
      throw UsageError(str(what, ": its special token of id ", special.id, " is not valid UTF-8"));
}

void add_tokenizer_metadata(const NamedTokenizer& named, Metadata& metadata) {
  nlohmann::json special = nlohmann::json::array();
  for (const text::SpecialToken& token : named.tokenizer.special_tokens())
    special.push_back({{"text", token.text}, {"id", token.id}});
  metadata["lm.tokenizer"] = named.tokenizer.identity();
  metadata["lm.tokenizer.source"] = named.source;
  metadata["lm.tokenizer.ranks"] = text::format_tiktoken_ranks(named.tokenizer);
  metadata["lm.tokenizer.special"] = special.dump();
}

std::optional<NamedTokenizer> tokenizer_from_metadata(const Metadata& metadata, const std::string& what) {
  const auto identity = metadata.find("lm.tokenizer");
  if (identity == metadata.end()) return std::nullopt;
  const auto entry = [&](const std::string& key) -> const std::string& {
    const auto it = metadata.find(key);
    if (it == metadata.end()) throw UsageError(str(what, ": it records lm.tokenizer but not ", key));
    return it->second;
  };
  std::vector<text::SpecialToken> special;
  try {
    for (const nlohmann::json& token : nlohmann::json::parse(entry("lm.tokenizer.special")))
      special.push_back({token.at("text").get<std::string>(), token.at("id").get<text::TokenId>()});
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(str(what, ": its lm.tokenizer.special is damaged (", e.what(), ")"));
  }
  try {
    NamedTokenizer named{text::parse_tiktoken_ranks({"lm.tokenizer.ranks", entry("lm.tokenizer.ranks")}, special),
                         entry("lm.tokenizer.source")};
    if (named.tokenizer.identity() != identity->second)
      throw UsageError(str(what, ": its tokenizer's entries make identity ", named.tokenizer.identity().substr(0, 8),
                           ", not the ", one_line(identity->second), " recorded (a damaged checkpoint)"));
    return named;
  } catch (const xgrad::Error& e) {
    throw UsageError(str(what, ": its tokenizer is damaged: ", e.what()));
  }
}

std::string describe(const NamedTokenizer& named) {
  return str(named.tokenizer.identity().substr(0, 8), " (", named.source, ")");
}

}  // namespace tools
