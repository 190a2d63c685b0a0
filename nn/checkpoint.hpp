#pragma once
// Checkpoints in the safetensors format, which numpy and PyTorch users can read:
//   8 bytes   little-endian u64 N, the header's length
//   N bytes   JSON: {"<name>": {"dtype": "F32"|"F64", "shape": [...], "data_offsets": [begin, end]},
//                    "__metadata__": {"<key>": "<value>", ...}}  (space-padded to 8 bytes)
//   the rest  raw little-endian tensor data; offsets count from its start
//
// xgrad writes F32 and F64 (its tensors' dtypes). It reads those and what PyTorch and
// numpy write for weights and masks, converted exactly: F16 and BF16 to float32; BOOL,
// U8, I8, I16 and U16 to float32; I32, U32, I64 and U64 to float64 (a value past 2^53
// that float64 cannot hold is an error). Loading into a model converts to each tensor's
// dtype there, and an integer that float32 cannot hold exactly (past 2^24) is an error.
//
// Files are written to a temporary file in the same folder, flushed to disk, then renamed
// over the target: a crash at any moment leaves the old checkpoint or the new one, never
// a broken one. Reading validates everything and throws an Error naming the file and the
// problem; it never crashes on a damaged or foreign file.
//
//   nn::save("run.safetensors", model, &adam, {{"step", "1200"}});
//   nn::Metadata meta = nn::load("run.safetensors", model, &adam);

#include <map>
#include <string>
#include <string_view>

#include "xgrad/autograd/state.hpp"

namespace xgrad {
class AtomicFileWriter;
}

namespace xgrad::nn {

using Metadata = std::map<std::string, std::string>;

struct SafetensorsContents {
  StateDict tensors;
  Metadata metadata;
  // Each tensor's dtype in the file ("F32", "BF16", "I64", ...), which load() checks
  // integers against. Left empty, every tensor counts as a float.
  std::map<std::string, std::string> dtypes;
};

std::string encode_safetensors(const StateDict& tensors, const Metadata& metadata = {});
// `source` names the data in error messages (a file path).
SafetensorsContents decode_safetensors(std::string_view bytes, const std::string& source = "<memory>");

void write_safetensors(const std::string& path, const StateDict& tensors, const Metadata& metadata = {});
// The same bytes into an open writer, left for its owner to commit (with other files).
void write_safetensors(AtomicFileWriter& out, const StateDict& tensors, const Metadata& metadata = {});
SafetensorsContents read_safetensors(const std::string& path);

// A model's state, and optionally an optimizer's under the prefix "optimizer.", in one
// file with the given metadata.
void save(const std::string& path, const Stateful& model, const Stateful* optimizer = nullptr,
          const Metadata& metadata = {});
// Loads what save() wrote into the model (and optimizer, which then must be in the
// file). Names and shapes must match exactly; on any error both are left as they were.
// Returns the metadata.
Metadata load(const std::string& path, Stateful& model, Stateful* optimizer = nullptr);
// The same from contents already decoded; `source` names them in errors.
Metadata load(const SafetensorsContents& contents, Stateful& model, Stateful* optimizer = nullptr,
              const std::string& source = "<memory>");

}  // namespace xgrad::nn
