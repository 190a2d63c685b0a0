// Times vocabulary training (docs/text.md, "Speed"): learns a vocabulary from a text
// REPEATS times on THREADS threads and prints one JSON line: the text's bytes, the
// vocabulary's size, merges and identity, the stop, the bytes per token on the text, and
// the seconds of each repeat (counting the pieces and training, not reading the file).
//   usage: text_train_probe TEXT VOCABULARY_SIZE THREADS REPEATS [OUT.tiktoken]
// With OUT.tiktoken, the last vocabulary is written there in tiktoken's format.
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/files.hpp"
#include "xgrad/autograd/parallel.hpp"
#include "xgrad/text/text.hpp"

using namespace xgrad;
using namespace xgrad::text;

int main(int argc, char** argv) {
  constexpr const char* kProbe = "text_train_probe";
  try {
    const std::vector<std::string> args(argv + 1, argv + argc);
    XGRAD_CHECK(args.size() == 4 || args.size() == 5, kProbe,
                "usage: text_train_probe TEXT VOCABULARY_SIZE THREADS REPEATS [OUT.tiktoken]");
    const std::string text = read_regular_file(args[0], kProbe);
    const BpeTrainerOptions options{.vocabulary_size = std::stoul(args[1]), .special_tokens = {"<|endoftext|>"}};
    set_num_threads(std::stoi(args[2]));
    nlohmann::json seconds = nlohmann::json::array();
    std::optional<TrainedVocabulary> trained;
    for (int repeat = 0; repeat < std::stoi(args[3]); ++repeat) {
      const auto start = std::chrono::steady_clock::now();
      trained.emplace(train_bpe(text, options));
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    XGRAD_CHECK(trained, kProbe, "REPEATS must be at least 1");
    if (args.size() == 5) write_file_atomically(args[4], format_tiktoken_ranks(trained->tokenizer), kProbe);
    std::cout << nlohmann::json{{"bytes", text.size()},
                                {"vocabulary_size", trained->tokenizer.vocabulary_size()},
                                {"merges", trained->merges()},
                                {"stop", stop_name(trained->stop)},
                                {"bytes_per_token", trained->bytes_per_token()},
                                {"identity", trained->tokenizer.identity()},
                                {"threads", num_threads()},
                                {"seconds", seconds}}
                     .dump()
              << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
}
