#pragma once
// Whole-file reads and writes that cannot lose data: what checkpoints (and the trainer's
// other outputs) go through.
//
// write_file_atomically: the bytes go to a temporary file in the target's folder, are
//   flushed to disk, then renamed over the target, so a crash leaves the old file or the
//   new one, never a broken one. Writing through a symlink writes the file it points to
//   (the link stays); a target that exists but is not a regular file (a device, FIFO or
//   folder) is refused, never replaced. The replaced file's permissions are kept.
//   The temporary is named temporary_name(target, pid, n): ".xgrad-<tag of the target's
//   name>-<writer's pid>-<n>.tmp". A writer killed mid-write leaves its one temporary;
//   the next write of the same target removes those whose writer is gone (and no other).
// read_regular_file: refuses folders, FIFOs and devices before reading (a FIFO would
//   block forever) with an Error naming the file.
// Errors start with `op` ("save", "checkpoint 'run.st'").

#include <string>
#include <string_view>

namespace xgrad::nn {

void write_file_atomically(const std::string& path, const std::string& bytes, std::string_view op);
inline constexpr const char* kTemporaryPrefix = ".xgrad-";
std::string temporary_name(const std::string& target, long pid, unsigned n);
std::string read_regular_file(const std::string& path, std::string_view op);

// The file `path` finally names: symlinks followed (even to a file that does not exist
// yet), everything else left as given.
std::string resolve_symlinks(const std::string& path);

}  // namespace xgrad::nn
