#pragma once
// How the tools meet their user on the command line. Every error is one line on stderr,
// "<tool>: <what is wrong, naming the flag or the file and field>", and exit status 2;
// output that could not be written (a full disk, a closed pipe) is such an error too.
//
//   int main(int argc, char** argv) {
//     return tools::run_tool("xgrad-generate", [&] {
//       Options o;
//       tools::Given given;  // the flags come from the program's table (settings.hpp)
//       if (const auto printed = kSettings.parse(argc, argv, o, given)) return *printed;  // --help
//       ...
//     });
//   }

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

#include "xgrad/autograd/error.hpp"

namespace CLI {
class App;
}

namespace tools {

// A bad flag or setting, or a file given that cannot be used.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A checkpoint's entry as a message shows it: on one line (line breaks as \n), at most
// 40 characters.
std::string one_line(const std::string& text);
// `text` with its line breaks written as \n and \r: an error stays one line on stderr,
// whatever a flag's value or a file's name held.
std::string unbroken(const std::string& text);

// Parses the command line (the tables do, settings.cpp); --help and --version print and
// give the exit status, a bad flag is a UsageError.
std::optional<int> parse_flags(CLI::App& app, int argc, char** argv);

// Throws a UsageError naming `flag` and `path` unless `path` names something that exists
// (a symlink loop or an unreadable folder is said as such, not as a raw filesystem error).
void check_input_exists(const std::string& flag, const std::string& path);

// Throws a UsageError when what was written to standard output did not reach it (checked
// as a tool writes, so that a closed pipe ends a long run at once).
void check_stdout();

// What a tool does with an error's line ("<tool>: <what>"): print it on stderr, by default.
using ErrorReport = std::function<void(const std::string& line, const std::exception& error)>;

// Runs a tool's body and returns its exit status: the body's, once standard output is
// checked; 2 after any exception, reported as one line.
int run_tool(const char* tool, const std::function<int()>& body, const ErrorReport& report = {});

}  // namespace tools
