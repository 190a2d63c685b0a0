#include "output.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "cli.hpp"
#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/files.hpp"

namespace tools::tokenize {

namespace fs = std::filesystem;
using xgrad::str;

namespace {

// "out/" and "out" are one folder: the path without a trailing separator. Not normalised
// as text: "link/../out" is where the kernel goes (through the link), and the checks must
// look where the files will be written.
fs::path folder_path(const std::string& path) {
  fs::path p(path);
  while (!p.has_filename() && p.has_parent_path() && p.parent_path() != p) p = p.parent_path();
  return p;
}

// The names in `folder` a run must not write over or mix with: `names`, and every shard.
std::vector<std::string> taken_names(const fs::path& folder, const std::vector<std::string>& names,
                                     std::error_code& error) {
  std::vector<std::string> taken;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".bin") || std::find(names.begin(), names.end(), name) != names.end()) taken.push_back(name);
  }
  std::sort(taken.begin(), taken.end());  // the same one named, whatever the listing's order
  return taken;
}

}  // namespace

OutputFolder::OutputFolder(Flag flag, std::string path, std::vector<std::string> names)
    : flag_(std::move(flag)), path_(std::move(path)) {
  const auto fail = [&](const std::string& what) { throw UsageError(str(flag_, " ", path_, ": ", what)); };
  const fs::path wanted = folder_path(path_);
  // Up from the folder to the first that exists: the folders to make, the outermost first.
  fs::path existing = wanted;
  for (;;) {
    struct stat info {};
    if (::stat(existing.c_str(), &info) == 0) {
      if (!S_ISDIR(info.st_mode))
        fail(str(existing == wanted ? "" : existing.string() + " ", "is ", xgrad::kind_of_file(existing.string()),
                 ", not a folder"));
      break;
    }
    // ENOTDIR: a file on the way, said as such once the walk reaches it.
    if (errno != ENOENT && errno != ENOTDIR)
      fail(str("cannot reach ", existing.string(), " (", std::strerror(errno), ")"));
    if (::lstat(existing.c_str(), &info) == 0) fail(str(existing.string(), " is a link to nothing"));
    missing_.insert(missing_.begin(), existing.string());
    existing = existing.has_parent_path() ? existing.parent_path() : fs::path(".");
  }
  if (::access(existing.c_str(), W_OK | X_OK) != 0)
    fail(str("cannot write in ", existing.string(), " (", std::strerror(errno), ")"));
  const long name_max = ::pathconf(existing.c_str(), _PC_NAME_MAX);
  for (const std::string& folder : missing_) {
    const std::size_t length = fs::path(folder).filename().string().size();
    if (name_max > 0 && length > static_cast<std::size_t>(name_max))
      fail(str("the name ", fs::path(folder).filename().string(), " is ", length, " bytes long, more than the ",
               name_max, " its file system allows"));
  }
  if (!missing_.empty()) return;
  std::error_code error;
  const std::vector<std::string> taken = taken_names(wanted, names, error);
  if (error) fail(str("cannot list its files (", error.message(), ")"));
  if (!taken.empty())
    fail(str("already holds ", taken.front(), taken.size() > 1 ? str(" and ", taken.size() - 1, " more") : "",
             " (refusing to write over files or to mix shards of two runs: remove them or choose another folder)"));
}

OutputFolder::~OutputFolder() {
  if (kept_) return;
  std::error_code ignored;
  for (auto file = claimed_.rbegin(); file != claimed_.rend(); ++file) fs::remove(*file, ignored);
  for (auto folder = made_.rbegin(); folder != made_.rend(); ++folder) ::rmdir(folder->c_str());
}

void OutputFolder::keep() noexcept {
  kept_ = true;
  unfinished_.clear();
}

void OutputFolder::make() {
  for (const std::string& folder : missing_) {
    if (::mkdir(folder.c_str(), 0777) == 0) {
      made_.push_back(folder);
      unfinished_.emplace_back(folder, xgrad::RemovedIfKilled::Kind::folder);
      continue;
    }
    const int error = errno;
    struct stat info {};
    if (error == EEXIST && ::stat(folder.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) continue;  // made meanwhile
    throw UsageError(str(flag_, " ", path_, ": cannot make the folder ", folder, " (", std::strerror(error), ")"));
  }
  missing_.clear();
  // A file made and removed: access() above says yes to root on a read-only file system.
  const std::string probe = (fs::path(path_) / xgrad::temporary_name("probe", ::getpid(), 0)).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw UsageError(str(flag_, " ", path_, ": cannot write in it (", std::strerror(errno), ")"));
  ::close(fd);
  ::unlink(probe.c_str());
}

std::string OutputFolder::claim(const std::string& name) {
  claimed_.push_back((fs::path(path_) / name).string());
  unfinished_.emplace_back(claimed_.back(), xgrad::RemovedIfKilled::Kind::file);
  return claimed_.back();
}

std::string shard_name(const std::string& split, std::size_t index) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%06zu", index);  // as llm.c's scripts number them
  return str(split, "_", digits, ".bin");
}

ShardSeries::ShardSeries(OutputFolder& folder, std::string split, std::size_t vocabulary_size,
                         std::uint64_t shard_tokens)
    : folder_(folder), split_(std::move(split)), vocabulary_size_(vocabulary_size), shard_tokens_(shard_tokens) {}

void ShardSeries::write(std::span<const xgrad::text::TokenId> tokens) {
  while (!tokens.empty()) {
    if (!current_) {
      current_ =
          std::make_unique<xgrad::text::ShardWriter>(folder_.claim(shard_name(split_, shards_)), vocabulary_size_);
      ++shards_;
    }
    const std::size_t taken =
        static_cast<std::size_t>(std::min<std::uint64_t>(shard_tokens_ - current_->tokens_written(), tokens.size()));
    current_->write(tokens.first(taken));
    tokens_ += taken;
    tokens = tokens.subspan(taken);
    if (current_->tokens_written() == shard_tokens_) finish();
  }
}

void ShardSeries::finish() {
  if (!current_) return;
  current_->commit();
  current_.reset();
}

}  // namespace tools::tokenize
