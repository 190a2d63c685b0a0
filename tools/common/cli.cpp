#include "cli.hpp"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <new>
#include <regex>

#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/files.hpp"

namespace tools {

std::string unbroken(const std::string& text) {
  std::string shown;
  for (const char c : text)
    shown += c == '\n' ? std::string("\\n") : c == '\r' ? std::string("\\r") : std::string(1, c);
  return shown;
}

std::string one_line(const std::string& text) {
  return text.size() > 40 ? unbroken(text.substr(0, 40)) + "..." : unbroken(text);
}

namespace {

// CLI11's own words where they read oddly: a flag given twice ("At Most 1 required but
// received 2"), a flag with no value ("1 required INT missing").
std::string plain_words(const CLI::ParseError& error) {
  static const std::regex twice(R"(^(--?[\w-]+): At Most 1 required but received (\d+)$)");
  static const std::regex missing(R"(^(--?[\w-]+): \d+ required \w+ missing$)");
  const std::string what = error.what();
  std::smatch match;
  if (std::regex_match(what, match, twice))
    return match[1].str() + " is given " + match[2].str() + " times: give it once";
  if (std::regex_match(what, match, missing)) return match[1].str() + " needs a value";
  return what;
}

}  // namespace

std::optional<int> parse_flags(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    throw UsageError(plain_words(e));
  }
  return std::nullopt;
}

void check_input_exists(const std::string& flag, const std::string& path) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (status.type() == std::filesystem::file_type::not_found) throw UsageError(flag + " " + path + ": no such file");
  if (error) throw UsageError(flag + " " + path + ": " + error.message());
}

void check_stdout() {
  std::cout.flush();
  if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout)
    throw UsageError(xgrad::str("writing to standard output failed (", std::strerror(errno), ")"));
}

namespace {

void die_by_signal(int signal) {
  if (xgrad::signal_deferred(signal)) return;  // a model's files being renamed into place
  xgrad::remove_unfinished_outputs();
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

}  // namespace

int run_tool(const char* tool, const std::function<int()>& body, const ErrorReport& report) {
  // A closed pipe, and a file past the size limit (ulimit -f), fail the write (which says
  // so, and removes what the run made) instead of killing the process with no word.
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGXFSZ, SIG_IGN);
  // Ctrl-C and SIGTERM end a tool as before, its files half written removed (a tool that
  // stops at its own pace catches them itself).
  std::signal(SIGINT, die_by_signal);
  std::signal(SIGTERM, die_by_signal);
  try {
    const int status = body();
    check_stdout();
    return status;
  } catch (const std::exception& e) {
    // A bare std::bad_alloc says nothing of what to do.
    const bool out_of_memory = dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
    const std::string line =
        xgrad::str(tool, ": ",
                   out_of_memory ? "out of memory (std::bad_alloc): the machine's memory, or a limit on it (ulimit -v, "
                                   "a cgroup), is too small for this run"
                                 : unbroken(e.what()));
    if (report)
      report(line, e);
    else
      std::fprintf(stderr, "%s\n", line.c_str());
    return 2;
  }
}

}  // namespace tools
