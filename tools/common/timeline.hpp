#pragma once
// --profile's outputs (xgrad-train, xgrad-bench): PATH.json, the profiler's Chrome trace;
// PATH.png, a timeline of the last profiled step (one row per thread, each event a bar
// coloured by its kind, the events it called drawn below it); and the table, returned.

#include <string>
#include <string_view>
#include <vector>

#include "flag.hpp"
#include "xgrad/nn/profiler.hpp"

namespace tools {

// How the files --profile writes begin (a file found there that begins otherwise is kept).
inline constexpr std::string_view kTraceOpening{"{\"displayTimeUnit\""};
inline constexpr std::string_view kPngSignature{"\x89PNG\r\n\x1a\n", 8};

std::string profile_trace_path(const std::string& path);     // PATH.json
std::string profile_timeline_path(const std::string& path);  // PATH.png

// Stops `profiler`, writes PATH.json and PATH.png (atomically; errors name `flag`), and
// returns the table.
std::string write_profile(xgrad::Profiler& profiler, const std::string& path, const Flag& flag);

void write_timeline_png(const std::string& path, const std::vector<xgrad::ProfileSpan>& spans, int threads,
                        const Flag& flag);

}  // namespace tools
