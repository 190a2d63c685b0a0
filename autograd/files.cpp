#include "xgrad/autograd/files.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <utility>
#include <vector>

#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/parallel.hpp"

namespace xgrad {

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
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileDescriptor& operator=(FileDescriptor&&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Opens `path` for reading, refusing anything but a regular file; its size in `size`.
FileDescriptor open_regular_file(const std::string& path, std::string_view op, std::size_t& size) {
  XGRAD_CHECK(!path.empty(), op, "the file name is empty");
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  XGRAD_CHECK(fd.get() >= 0, op, "cannot open '", path, "': ", error_text(errno));
  struct stat info {};
  XGRAD_CHECK(::fstat(fd.get(), &info) == 0, op, "cannot read '", path, "': ", error_text(errno));
  XGRAD_CHECK(S_ISREG(info.st_mode), op, "'", path, "' is ", kind_of(info.st_mode), ", not a file");
  size = static_cast<std::size_t>(info.st_size);
  return fd;
}

// The bytes of an open file: its `size` bytes, or, where the system reports a size of 0
// (/proc, /sys: made as they are read), everything up to the end.
std::string read_open_file(const FileDescriptor& fd, std::size_t size, const std::string& path, std::string_view op) {
  const bool to_the_end = size == 0;
  std::string bytes;
  std::size_t done = 0;
  for (;;) {
    if (done == bytes.size()) {
      if (!to_the_end && done == size) break;
      try {
        bytes.resize(to_the_end ? done + (std::size_t{1} << 16) : size);
      } catch (const std::bad_alloc&) {
        fail(op, "'", path, "' is too large to read (", to_the_end ? done : size, " bytes)");
      }
    }
    const ssize_t n = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    XGRAD_CHECK(n >= 0, op, "read error in '", path, "': ", error_text(errno));
    if (n == 0) break;  // the end (or the file shrank while we read it)
    done += static_cast<std::size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

}  // namespace

std::string temporary_name(const std::string& target, long pid, unsigned n) {
  return str(kTemporaryPrefix, name_tag(target), "-", pid, "-", n, ".tmp");
}

namespace {

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// MurmurHash3's 64-bit finalizer: every input bit moves every output bit.
std::uint64_t mix(std::uint64_t h) noexcept {
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 33);
}

// One chunk, 8 bytes at a time in four independent lanes (one chain of multiplies would
// wait on each product); the tail zero-padded, the length folded in.
std::uint64_t chunk_hash(std::string_view bytes) noexcept {
  std::uint64_t lanes[4] = {1, 2, 3, 4};
  std::size_t i = 0;
  for (; i + 32 <= bytes.size(); i += 32)
    for (int lane = 0; lane < 4; ++lane) {
      std::uint64_t word;
      std::memcpy(&word, bytes.data() + i + 8 * lane, 8);
      lanes[lane] = (lanes[lane] ^ word) * kGolden;
      lanes[lane] ^= lanes[lane] >> 29;
    }
  for (int lane = 0; i < bytes.size(); i += 8, ++lane) {
    std::uint64_t word = 0;
    std::memcpy(&word, bytes.data() + i, std::min<std::size_t>(8, bytes.size() - i));
    lanes[lane] = (lanes[lane] ^ word) * kGolden;
  }
  std::uint64_t h = bytes.size();
  for (const std::uint64_t lane : lanes) h = mix(h ^ lane) * kGolden;
  return h;
}

}  // namespace

std::uint64_t fingerprint(std::string_view bytes) {
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  std::vector<std::uint64_t> chunks((bytes.size() + kChunk - 1) / kChunk);
  parallel_for_chunks(bytes.size(), kChunk, 0.25, [&](std::size_t begin, std::size_t end) {
    chunks[begin / kChunk] = chunk_hash(bytes.substr(begin, end - begin));
  });
  std::uint64_t h = mix(bytes.size() * kGolden);
  for (const std::uint64_t chunk : chunks) h = mix(h ^ chunk) * kGolden;
  return mix(h);
}

const char* kind_of_file(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return "nothing";
  return S_ISREG(info.st_mode) ? "a file" : kind_of(info.st_mode);
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat first {
  }, second{};
  return ::stat(a.c_str(), &first) == 0 && ::stat(b.c_str(), &second) == 0 && first.st_dev == second.st_dev &&
         first.st_ino == second.st_ino;
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

namespace {

// The paths to remove if the process dies of a signal, where a signal handler can read
// them: a list that only grows (nodes are reused, never freed), each node free, being
// filled or holding a path. A path too long for a node goes unlisted: a temporary then
// waits for the next writer of its target.
struct ListedPath {
  enum State { kFree, kFilling, kHeld };
  std::atomic<int> state{kFree};
  RemovedIfKilled::Kind kind = RemovedIfKilled::Kind::file;
  char path[4096] = {};
  ListedPath* next = nullptr;
};
std::atomic<ListedPath*> listed_paths{nullptr};

ListedPath* list_path(const std::string& path, RemovedIfKilled::Kind kind) {
  if (path.size() >= sizeof(ListedPath::path)) return nullptr;
  ListedPath* node = nullptr;
  for (ListedPath* free = listed_paths.load(std::memory_order_acquire); free && !node; free = free->next) {
    int expected = ListedPath::kFree;
    if (free->state.compare_exchange_strong(expected, ListedPath::kFilling)) node = free;
  }
  if (!node) {
    node = new ListedPath;
    node->state.store(ListedPath::kFilling);
    node->next = listed_paths.load(std::memory_order_relaxed);
    while (!listed_paths.compare_exchange_weak(node->next, node, std::memory_order_release)) {
    }
  }
  node->kind = kind;
  std::memcpy(node->path, path.c_str(), path.size() + 1);
  node->state.store(ListedPath::kHeld, std::memory_order_release);
  return node;
}

}  // namespace

RemovedIfKilled::RemovedIfKilled(const std::string& path, Kind kind) : listed_(list_path(path, kind)) {}

RemovedIfKilled::~RemovedIfKilled() { release(); }

RemovedIfKilled::RemovedIfKilled(RemovedIfKilled&& other) noexcept : listed_(std::exchange(other.listed_, nullptr)) {}

RemovedIfKilled& RemovedIfKilled::operator=(RemovedIfKilled&& other) noexcept {
  if (this != &other) {
    release();
    listed_ = std::exchange(other.listed_, nullptr);
  }
  return *this;
}

void RemovedIfKilled::release() noexcept {
  if (listed_)
    static_cast<ListedPath*>(std::exchange(listed_, nullptr))
        ->state.store(ListedPath::kFree, std::memory_order_release);
}

void remove_unfinished_outputs() noexcept {
  const auto held = [](const ListedPath* node, RemovedIfKilled::Kind kind) {
    return node->state.load(std::memory_order_acquire) == ListedPath::kHeld && node->kind == kind;
  };
  ListedPath* const first = listed_paths.load(std::memory_order_acquire);
  for (ListedPath* node = first; node; node = node->next)
    if (held(node, RemovedIfKilled::Kind::file)) ::unlink(node->path);
  // Folders once their files are gone, the innermost first: rmdir removes only empty
  // ones, so rounds until none goes put them in order without sorting.
  for (bool removed = true; removed;) {
    removed = false;
    for (ListedPath* node = first; node; node = node->next)
      if (held(node, RemovedIfKilled::Kind::folder) && ::rmdir(node->path) == 0) removed = true;
  }
}

AtomicFileWriter::AtomicFileWriter(const std::string& path, std::string_view op) : path_(path), op_(op) {
  XGRAD_CHECK(!path.empty(), op, "the file name is empty");
  target_ = resolve_symlinks(path);
  mode_t mode = 0644;
  struct stat existing {};
  if (::stat(target_.c_str(), &existing) == 0) {
    XGRAD_CHECK(S_ISREG(existing.st_mode), op, "'", path, "' is ", kind_of(existing.st_mode),
                "; refusing to replace it");
    mode = existing.st_mode & 07777;
  }
  mode_ = mode;
  remove_dead_writers_temporaries(target_);
  // A short name, so that a target name near the 255-byte limit still has a temporary.
  static std::atomic<unsigned> counter{0};
  temporary_ = str(folder_of(target_), "/", temporary_name(target_, ::getpid(), counter++));
  listed_ = RemovedIfKilled(temporary_, RemovedIfKilled::Kind::file);  // first: listing may throw
  fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  XGRAD_CHECK(fd_ >= 0, op, "cannot create a file in '", folder_of(target_), "': ", error_text(errno));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temporary_.c_str());
}

void AtomicFileWriter::check_open(const char* call) const {
  XGRAD_CHECK(fd_ >= 0 && !failed_, op_, call, " on the writer of '", path_, "' after ",
              failed_                    ? "an error: nothing more is written"
              : finished_ && !committed_ ? "finish()"
                                         : "commit()");
}

void AtomicFileWriter::write_at(std::uint64_t offset, std::string_view bytes) {
  check_open("write_at()");
  XGRAD_CHECK(offset <= size_ && bytes.size() <= size_ - offset, op_, "write_at(", offset, ", ", bytes.size(),
              " bytes) on '", path_, "' reaches past the ", size_, " bytes written");
  failed_ = true;  // until the bytes are down
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    XGRAD_CHECK(n > 0, op_, "writing '", path_, "' failed: ", error_text(n < 0 ? errno : ENOSPC));
    done += static_cast<std::size_t>(n);
  }
  failed_ = false;
}

void AtomicFileWriter::write(std::string_view bytes) {
  check_open("write()");
  failed_ = true;  // until the bytes are down
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    XGRAD_CHECK(n > 0, op_, "writing '", path_, "' failed: ", error_text(n < 0 ? errno : ENOSPC));
    done += static_cast<std::size_t>(n);
  }
  size_ += bytes.size();
  failed_ = false;
}

void AtomicFileWriter::finish() {
  check_open("finish()");
  failed_ = true;
  // fchmod: the mode as asked, whatever the umask.
  XGRAD_CHECK(::fchmod(fd_, mode_) == 0 && ::fsync(fd_) == 0, op_, "flushing '", path_,
              "' failed: ", error_text(errno));
  if (::close(std::exchange(fd_, -1)) != 0) fail(op_, "closing '", path_, "' failed: ", error_text(errno));
  failed_ = false;
  finished_ = true;
}

void AtomicFileWriter::commit() {
  if (!finished_) finish();
  XGRAD_CHECK(!failed_ && !committed_, op_, "commit() on the writer of '", path_, "' after ",
              failed_ ? "an error" : "commit()");
  failed_ = true;
  if (std::rename(temporary_.c_str(), target_.c_str()) != 0)
    fail(op_, "cannot move the new file to '", target_, "': ", error_text(errno));
  failed_ = false;
  committed_ = true;
  listed_.release();  // after the rename: a signal before it removes the temporary
  // Make the rename itself durable.
  FileDescriptor folder(::open(folder_of(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (folder.get() >= 0) ::fsync(folder.get());
}

namespace {
// One word, so that a handler on another thread and the last guard's end never miss each
// other: the guards alive in the low 16 bits, the signal waiting above them.
std::atomic<std::uint32_t> deferral{0};
constexpr std::uint32_t kDepth = 0xffff;
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);  // async-signal-safe
}  // namespace

SignalsDeferred::SignalsDeferred() noexcept { deferral.fetch_add(1); }

SignalsDeferred::~SignalsDeferred() {
  std::uint32_t word = deferral.load();
  // The last guard takes the waiting signal with it, in the same exchange.
  while (!deferral.compare_exchange_weak(word, (word & kDepth) == 1 ? 0 : word - 1)) {
  }
  if ((word & kDepth) == 1 && word >> 16) ::raise(static_cast<int>(word >> 16));
}

bool signal_deferred(int signal) noexcept {
  std::uint32_t word = deferral.load();
  do {
    if ((word & kDepth) == 0) return false;
  } while (!deferral.compare_exchange_weak(word, (word & kDepth) | static_cast<std::uint32_t>(signal) << 16));
  return true;
}

void write_file_atomically(const std::string& path, const std::string& bytes, std::string_view op) {
  AtomicFileWriter writer(path, op);
  writer.write(bytes);
  writer.commit();
}

std::string read_regular_file(const std::string& path, std::string_view op) {
  std::size_t size = 0;
  const FileDescriptor fd = open_regular_file(path, op, size);
  return read_open_file(fd, size, path, op);
}

MappedFile::MappedFile(const std::string& path, std::string_view op) : path_(path) {
  std::size_t size = 0;
  const FileDescriptor fd = open_regular_file(path, op, size);
  if (size == 0) {  // mmap refuses a length of 0; a file of /proc reports 0 and has bytes
    read_ = read_open_file(fd, size, path, op);
    return;
  }
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  XGRAD_CHECK(data != MAP_FAILED, op, "cannot map '", path, "' (", size, " bytes): ", error_text(errno));
  data_ = data;
  size_ = size;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<void*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      read_(std::exchange(other.read_, {})),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(const_cast<void*>(data_), size_);
    path_ = std::move(other.path_);
    read_ = std::exchange(other.read_, {});
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace xgrad
