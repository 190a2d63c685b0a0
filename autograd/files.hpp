#pragma once
// Files that cannot lose data: what checkpoints, the tools' outputs, vocabularies and
// token shards go through. Part of the runtime: nothing here knows what the bytes mean.
//
// AtomicFileWriter: a file written in pieces that appears whole or not at all. The bytes
//   go to a temporary file in the target's folder; commit() flushes it to disk and
//   renames it over the target, so a crash leaves the old file or the new one, never a
//   broken one. Destroyed without commit() (an exception, an early return), it removes
//   its temporary and leaves the target untouched. Writing through a symlink writes the
//   file it points to (the link stays); a target that exists but is not a regular file
//   (a device, FIFO or folder) is refused, never replaced. The replaced file's
//   permissions are kept.
//   The temporary is named temporary_name(target, pid, n): ".xgrad-<tag of the target's
//   name>-<writer's pid>-<n>.tmp". A writer killed mid-write leaves its one temporary;
//   the next writer of the same target removes those whose writer is gone (and no other).
// write_file_atomically: the same for bytes held whole.
// read_regular_file: a whole file's bytes (to its end where the system reports a size of
//   0, as /proc's files). Folders, FIFOs and devices are refused before reading (a FIFO
//   would block forever).
// MappedFile: a regular file mapped read-only (refused as read_regular_file refuses).
// fingerprint: a 64-bit hash of bytes, to tell whether a run's data changed.
//
// Errors are xgrad::Errors that start with `op` ("save", "checkpoint 'run.st'", "token
// shard") and name the file.

#include <cstdint>
#include <string>
#include <string_view>

namespace xgrad {

// A path an unfinished output has made, removed by remove_unfinished_outputs() if the
// process dies of a signal while the object lives: a file (a temporary, or a finished
// part of an output the run removes if it fails) or a folder made for one (removed only
// once empty). The object going, or release(), takes the path off the list and leaves it
// as it is: the output finished, or its owner removed it.
class RemovedIfKilled {
 public:
  enum class Kind { file, folder };
  RemovedIfKilled() = default;
  RemovedIfKilled(const std::string& path, Kind kind);
  ~RemovedIfKilled();
  RemovedIfKilled(RemovedIfKilled&& other) noexcept;
  RemovedIfKilled& operator=(RemovedIfKilled&& other) noexcept;

  void release() noexcept;

 private:
  void* listed_ = nullptr;  // its entry in the list the signal handler reads
};

// Removes the paths listed by living RemovedIfKilled objects (open writers' temporaries
// among them): for a signal handler about to end the process, so that Ctrl-C leaves
// nothing behind (async-signal-safe: no allocation, no lock). Files first, then the
// folders that are empty. The tools call it before dying of a signal.
void remove_unfinished_outputs() noexcept;

// While one lives, a signal that would end the process waits: the tools' handlers ask
// signal_deferred() first, which records the signal; when the last one goes, the signal
// is raised again. For the renames that must land together (a model's files, config.json
// last): then only SIGKILL can part them.
class SignalsDeferred {
 public:
  SignalsDeferred() noexcept;
  ~SignalsDeferred();
  SignalsDeferred(const SignalsDeferred&) = delete;
  SignalsDeferred& operator=(const SignalsDeferred&) = delete;
};

// For a signal handler about to end the process: true, with the signal recorded for
// later, while a SignalsDeferred lives (async-signal-safe).
bool signal_deferred(int signal) noexcept;

class AtomicFileWriter {
 public:
  // Opens the temporary beside `path` (beside the file it finally names, symlinks
  // followed). An Error when the target exists and is no regular file, or the folder
  // cannot take a new file.
  AtomicFileWriter(const std::string& path, std::string_view op);
  // Without commit(): the temporary removed, the target untouched.
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Appends `bytes` to the temporary.
  void write(std::string_view bytes);
  // Writes `bytes` over what was written at [offset, offset + bytes.size()): a header
  // whose fields are known only at the end. An Error past what was written.
  void write_at(std::uint64_t offset, std::string_view bytes);
  // Flushes the temporary to disk and closes it: all that can fail for want of space,
  // done before commit() (for files that are committed together). No more writes.
  void finish();
  // finish() unless done, then renames the temporary over the target (and flushes the
  // folder, so the rename itself lasts). After commit(), or after any call that threw,
  // the writer takes no more calls.
  void commit();

  // The bytes written so far.
  std::uint64_t size() const noexcept { return size_; }
  // The path given.
  const std::string& path() const noexcept { return path_; }

 private:
  void check_open(const char* call) const;

  std::string path_, target_, temporary_, op_;
  int fd_ = -1;
  RemovedIfKilled listed_;  // the temporary, until the rename
  std::uint64_t size_ = 0;
  unsigned mode_ = 0644;
  bool failed_ = false, finished_ = false, committed_ = false;
};

// A writer with the bytes given, committed.
void write_file_atomically(const std::string& path, const std::string& bytes, std::string_view op);

inline constexpr const char* kTemporaryPrefix = ".xgrad-";
std::string temporary_name(const std::string& target, long pid, unsigned n);

std::string read_regular_file(const std::string& path, std::string_view op);

// A regular file mapped read-only, unmapped when the object goes. An empty file maps to
// empty bytes; one the system reports as empty (/proc, /sys) is read instead. The mapping stays valid while the object
// lives, even when the file is replaced by a rename (xgrad's writers replace files so); a file cut short in place by
// another program while it is mapped is not safe to read (the system signals SIGBUS).
class MappedFile {
 public:
  MappedFile(const std::string& path, std::string_view op);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view bytes() const noexcept {
    return data_ ? std::string_view{static_cast<const char*>(data_), size_} : std::string_view{read_};
  }
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  std::string read_;  // the bytes of a file the system reports as empty (/proc), read
  const void* data_ = nullptr;
  std::size_t size_ = 0;
};

// A 64-bit hash of `bytes`: 1 MiB chunks hashed in parallel, their hashes combined in
// order, so the same on any thread count. It tells changed data from the same (a
// resumed run's text or shards); it is no defence against a collision made on purpose.
std::uint64_t fingerprint(std::string_view bytes);

// What `path` names, for messages: "a file", "a folder", "a device", "a FIFO", "a socket"
// (symlinks followed), or "nothing".
const char* kind_of_file(const std::string& path);

// Whether two paths name one file (`a.txt` and `./a.txt`, a link and its file, a hard
// link): the same device and inode. False when either cannot be looked at.
bool same_file(const std::string& a, const std::string& b);

// The file `path` finally names: symlinks followed (even to a file that does not exist
// yet), everything else left as given.
std::string resolve_symlinks(const std::string& path);

}  // namespace xgrad
