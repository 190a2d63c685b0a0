// xgrad's side of the tokenizer's reference test (text_reference/compare.cjs) and of the
// speed benchmark (bench/tokenizer_speed.py): GPT-2's vocabulary read from its files,
// then one of
//   encode CASES.json OUT.json  each case {"text": ...} or {"file": PATH}, with "special":
//                               "none" (encode_ordinary) or "all" (encode, every special
//                               token allowed); out: per case its "ids" and the byte
//                               lengths of its "pieces" (for the report of a mismatch)
//   files OUT_DIR               the vocabulary written back: OUT_DIR/encoder.json,
//                               vocab.bpe and gpt2.tiktoken; prints the identity
//   bench TEXT REPEATS [THREADS]  encodes TEXT (encode_ordinary) REPEATS times on THREADS
//                               threads (1); prints {"bytes", "tokens", "seconds": [...]}
//   usage: text_bpe_probe ENCODER_JSON VOCAB_BPE COMMAND ARGS...
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/files.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/text/text.hpp"

using namespace xgrad;
using namespace xgrad::text;

namespace {

constexpr const char* kProbe = "text_bpe_probe";

std::string read(const std::string& path) { return read_regular_file(path, kProbe); }

void encode_cases(const Tokenizer& tokenizer, const std::string& cases_path, const std::string& out_path) {
  const nlohmann::json cases = nlohmann::json::parse(read(cases_path));
  nlohmann::json results = nlohmann::json::array();
  for (const nlohmann::json& c : cases) {
    const std::string text =
        c.contains("file") ? read(c.at("file").get<std::string>()) : c.at("text").get<std::string>();
    const std::string special = c.value("special", "none");
    XGRAD_CHECK(special == "none" || special == "all", kProbe, "\"special\" is \"", special, "\": none or all");
    const std::vector<TokenId> ids =
        special == "all" ? tokenizer.encode(text, AllowedSpecial::all()) : tokenizer.encode_ordinary(text);
    std::vector<std::size_t> pieces;
    for (const std::string_view piece : gpt2_pieces(text)) pieces.push_back(piece.size());
    XGRAD_CHECK(tokenizer.decode(ids) == text, kProbe, "a case does not decode to itself");
    results.push_back({{"ids", ids}, {"pieces", pieces}});
  }
  write_file_atomically(out_path, results.dump(), kProbe);
}

void write_files(const Tokenizer& tokenizer, const std::string& folder) {
  const Gpt2Vocabulary gpt2 = format_gpt2_vocabulary(tokenizer);
  write_file_atomically(folder + "/encoder.json", gpt2.encoder_json, kProbe);
  write_file_atomically(folder + "/vocab.bpe", gpt2.vocab_bpe, kProbe);
  write_file_atomically(folder + "/gpt2.tiktoken", format_tiktoken_ranks(tokenizer), kProbe);
  std::cout << tokenizer.identity() << "\n";
}

void bench(const Tokenizer& tokenizer, const std::string& text_path, int repeats, int threads) {
  set_num_threads(threads);
  const std::string text = read(text_path);
  std::vector<TokenId> ids;
  nlohmann::json seconds = nlohmann::json::array();
  for (int i = 0; i < repeats; ++i) {
    ids.clear();
    const auto start = std::chrono::steady_clock::now();
    tokenizer.encode_ordinary(text, ids);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::cout << nlohmann::json{{"bytes", text.size()}, {"tokens", ids.size()}, {"seconds", seconds}}.dump() << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> args(argv + 1, argv + argc);
    XGRAD_CHECK(args.size() >= 3, kProbe, "usage: text_bpe_probe ENCODER_JSON VOCAB_BPE COMMAND ARGS...");
    const std::string encoder = read(args[0]), merges = read(args[1]);
    const Tokenizer tokenizer = parse_gpt2_vocabulary({args[0], encoder}, {args[1], merges});
    const std::string& command = args[2];
    if (command == "encode" && args.size() == 5)
      encode_cases(tokenizer, args[3], args[4]);
    else if (command == "files" && args.size() == 4)
      write_files(tokenizer, args[3]);
    else if (command == "bench" && (args.size() == 5 || args.size() == 6))
      bench(tokenizer, args[3], std::stoi(args[4]), args.size() == 6 ? std::stoi(args[5]) : 1);
    else
      fail(kProbe, "unknown command or wrong arguments: ", command);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
}
