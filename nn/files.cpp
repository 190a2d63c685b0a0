#include "xgrad/nn/files.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include "xgrad/autograd/error.hpp"

namespace xgrad::nn {

namespace {

std::string error_text(int error) { return std::strerror(error); }

std::string folder_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The 8 hex digits (FNV-1a) that tie a temporary file to its target's name.
std::string name_tag(const std::string& target) {
  const std::string name = target.substr(target.rfind('/') + 1);
  std::uint32_t hash = 2166136261u;
  for (const unsigned char c : name) hash = (hash ^ c) * 16777619u;
  char tag[9];
  std::snprintf(tag, sizeof tag, "%08x", hash);
  return tag;
}

// Removes the temporaries that writers of `target` now gone left beside it (a writer
// killed mid-write cannot remove its own): only files named as ours for this target,
// and only those whose writer's process no longer exists.
void remove_dead_writers_temporaries(const std::string& target) {
  const std::string prefix = str(kTemporaryPrefix, name_tag(target), "-");
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(folder_of(target), error)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix) || !name.ends_with(".tmp")) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + prefix.size(), &end, 10);
    if (pid <= 0 || *end != '-' || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
    std::error_code ignored;
    std::filesystem::remove(entry.path(), ignored);
  }
}

// Closes a descriptor on every path out.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Writes all of `bytes` to the new file `path` (mode `mode`) and forces it to disk.
void write_new_file(const std::string& path, const std::string& bytes, mode_t mode, std::string_view op) {
  FileDescriptor fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  XGRAD_CHECK(fd.get() >= 0, op, "cannot create a file in '", folder_of(path), "': ", error_text(errno));
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd.get(), bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    XGRAD_CHECK(n > 0, op, "writing '", path, "' failed: ", error_text(n < 0 ? errno : ENOSPC));
    written += static_cast<std::size_t>(n);
  }
  XGRAD_CHECK(::fchmod(fd.get(), mode) == 0 && ::fsync(fd.get()) == 0, op, "flushing '", path,
              "' failed: ", error_text(errno));
  XGRAD_CHECK(::close(fd.release()) == 0, op, "closing '", path, "' failed: ", error_text(errno));
}

}  // namespace

std::string temporary_name(const std::string& target, long pid, unsigned n) {
  return str(kTemporaryPrefix, name_tag(target), "-", pid, "-", n, ".tmp");
}

std::string resolve_symlinks(const std::string& path) {
  std::string target = path;
  for (int hops = 0; hops < 40; ++hops) {  // the kernel's own limit on a chain of links
    std::error_code error;
    if (!std::filesystem::is_symlink(target, error)) return target;
    const std::filesystem::path link = std::filesystem::read_symlink(target, error);
    if (error) return target;
    target = link.is_absolute() ? link.string() : (std::filesystem::path(folder_of(target)) / link).string();
  }
  fail("file", "'", path, "': too many levels of symbolic links");
}

void write_file_atomically(const std::string& path, const std::string& bytes, std::string_view op) {
  XGRAD_CHECK(!path.empty(), op, "the file name is empty");
  const std::string target = resolve_symlinks(path);
  mode_t mode = 0644;
  struct stat existing {};
  if (::stat(target.c_str(), &existing) == 0) {
    XGRAD_CHECK(S_ISREG(existing.st_mode), op, "'", path, "' is ", kind_of(existing.st_mode),
                "; refusing to replace it");
    mode = existing.st_mode & 07777;
  }
  remove_dead_writers_temporaries(target);
  // A short name, so that a target name near the 255-byte limit still has a temporary.
  static std::atomic<unsigned> counter{0};
  const std::string temporary = str(folder_of(target), "/", temporary_name(target, ::getpid(), counter++));
  try {
    write_new_file(temporary, bytes, mode, op);
  } catch (...) {
    ::unlink(temporary.c_str());
    throw;
  }
  if (std::rename(temporary.c_str(), target.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    fail(op, "cannot move the new file to '", target, "': ", error_text(error));
  }
  // Make the rename itself durable.
  FileDescriptor folder(::open(folder_of(target).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (folder.get() >= 0) ::fsync(folder.get());
}

std::string read_regular_file(const std::string& path, std::string_view op) {
  XGRAD_CHECK(!path.empty(), op, "the file name is empty");
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  XGRAD_CHECK(fd.get() >= 0, op, "cannot open: ", error_text(errno));
  struct stat info {};
  XGRAD_CHECK(::fstat(fd.get(), &info) == 0, op, "cannot read: ", error_text(errno));
  XGRAD_CHECK(S_ISREG(info.st_mode), op, "is ", kind_of(info.st_mode), ", not a file");
  std::string bytes;
  try {
    bytes.resize(static_cast<std::size_t>(info.st_size));
  } catch (const std::bad_alloc&) {
    fail(op, "too large to read (", info.st_size, " bytes)");
  }
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    XGRAD_CHECK(n >= 0, op, "read error: ", error_text(errno));
    if (n == 0) break;  // the file shrank while we read it
    done += static_cast<std::size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

}  // namespace xgrad::nn
