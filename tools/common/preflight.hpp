#pragma once
// Checks made before a run does any work, so that it fails at once with one line rather
// than after hours, and never destroys a file:
//   check_outputs: every output (--save, --metrics, --plot, --attention-png) can be
//     written: not a folder, device or reader-less FIFO where a file goes, a name the
//     folder allows, in a folder that can be written; no two outputs name the same file,
//     and none names an input (--text, --init-from, --resume; except --save, which
//     updates the resumed checkpoint in place). An existing --save file is replaced only
//     when it is a checkpoint of xgrad-train for the same task (or empty).
//   check_output_file: one output as check_outputs checks each, for other tools
//     (xgrad-bench --profile); an existing file is replaced only when it opens with one of
//     `openings` (it holds `kind`).
//   check_memory: the run's estimated memory, in each of the `ranks_here` processes on
//     this machine, fits it (RAM, cgroup limit, address-space limit); otherwise the
//     message names the flags or the file that need it. `text_bytes`: the --text held in
//     memory.

#include <initializer_list>
#include <string>
#include <string_view>

#include "config.hpp"
#include "xgrad/models/config.hpp"

namespace tools {

void check_outputs(const Config& config);
void check_output_file(const Flag& flag, const std::string& path, std::initializer_list<std::string_view> openings,
                       const char* kind);
// The model a run trains, in the sizes its memory estimate needs.
struct ModelShape {
  double parameters = 0;
  double trained = 0;  // those with a gradient and optimizer state (under LoRA, at most its adapters)
  double width = 0, ff = 0, layers = 0, vocab = 0;
  double query_width = 0, kv_width = 0;  // attention's q, and each of k and v
  double ff_values = 3;                  // values a block keeps per MLP column: GELU's 3, SwiGLU's 4
  double adapters = 0;                   // LoRA's parameters, were every linear a target
  std::string sized_by;                  // the flags or the file its sizes come from
};

// The shape of the run's model: a published model's config (`published`, read from
// `source`; a source left empty: sized by the flags), else xgrad's own models' flags.
ModelShape model_shape(const Config& config, const xgrad::models::ModelConfig* published, const std::string& source);

void check_memory(const Config& config, const ModelShape& model, int ranks_here, std::size_t text_bytes);

}  // namespace tools
