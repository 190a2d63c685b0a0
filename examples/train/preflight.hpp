#pragma once
// Checks made before a run does any work, so that it fails at once with one line rather
// than after hours, and never destroys a file:
//   check_outputs: every output (--save, --metrics, --plot, --attention-png) can be
//     written: not a folder, device or reader-less FIFO where a file goes, a name the
//     folder allows, in a folder that can be written; no two outputs name the same file,
//     and none names an input (--text, --init-from, --resume; except --save, which
//     updates the resumed checkpoint in place). An existing --save file is replaced only
//     when it is a checkpoint of xgrad-train for the same task (or empty).
//   check_memory: the run's estimated memory, in each of the `ranks_here` processes on
//     this machine, fits it (RAM, cgroup limit, address-space limit); otherwise the
//     message names the flags that need it. `text_bytes`: the --text held in memory.

#include "config.hpp"

namespace train {

void check_outputs(const Config& config);
void check_memory(const Config& config, int ranks_here, std::size_t text_bytes);

}  // namespace train
