#include "timeline.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "canvas.hpp"
#include "xgrad/autograd/error.hpp"

namespace tools {

namespace {

// Colours by what an event was; a pool task is its op's share on another thread, drawn
// in its op's colour, lighter.
const std::map<std::string, Color> kKindColors = {
    {"forward", {31, 119, 180}}, {"backward", {255, 127, 14}}, {"product", {44, 160, 44}},
    {"engine", {148, 103, 189}}, {"optimizer", {214, 39, 40}}, {"pool wait", {170, 170, 170}},
    {"scope", {140, 86, 75}},
};

Color lighter(Color c) {
  const auto mix = [](unsigned char v) { return static_cast<unsigned char>(v + (255 - v) * 2 / 5); };
  return {mix(c.r), mix(c.g), mix(c.b)};
}

Color color_of(const xgrad::ProfileSpan& span) {
  const auto found = kKindColors.find(span.kind);
  const Color c = found == kKindColors.end() ? kGrey : found->second;
  return span.name.rfind("pool task", 0) == 0 ? lighter(c) : c;
}

}  // namespace

std::string profile_trace_path(const std::string& path) { return path + ".json"; }
std::string profile_timeline_path(const std::string& path) { return path + ".png"; }

std::string write_profile(xgrad::Profiler& profiler, const std::string& path, const Flag& flag) {
  profiler.stop();
  const std::string trace = profile_trace_path(path);
  try {
    profiler.save_trace(trace);
  } catch (const xgrad::Error& e) {
    throw xgrad::Error(xgrad::str(flag, " ", trace, ": ", e.what()));
  }
  write_timeline_png(profile_timeline_path(path), profiler.spans(), static_cast<int>(profiler.threads().size()), flag);
  return profiler.table();
}

void write_timeline_png(const std::string& path, const std::vector<xgrad::ProfileSpan>& spans, int threads,
                        const Flag& flag) {
  // The window: the last step the caller marked, else everything.
  std::int64_t begin = 0, end = 1;
  for (const xgrad::ProfileSpan& s : spans) end = std::max(end, s.end_ns);
  for (const xgrad::ProfileSpan& s : spans)
    if (s.thread == 0 && s.kind == "step") begin = s.begin_ns, end = s.end_ns;
  std::vector<int> top_depth(static_cast<std::size_t>(threads), 1 << 20), levels(static_cast<std::size_t>(threads), 1);
  std::vector<const xgrad::ProfileSpan*> drawn;
  for (const xgrad::ProfileSpan& s : spans) {
    if (s.kind == "step" || s.end_ns <= begin || s.begin_ns >= end || s.thread >= threads) continue;
    drawn.push_back(&s);
    int& top = top_depth[static_cast<std::size_t>(s.thread)];
    top = std::min(top, s.depth);
  }
  constexpr int kLevelHeight = 18, kMaxLevels = 6, kRowGap = 14, kLeft = 120, kTop = 56;
  for (const xgrad::ProfileSpan* s : drawn) {
    int& n = levels[static_cast<std::size_t>(s->thread)];
    n = std::min(kMaxLevels, std::max(n, s->depth - top_depth[static_cast<std::size_t>(s->thread)] + 1));
  }
  std::vector<int> row_top(static_cast<std::size_t>(threads));
  int y = kTop;
  for (int t = 0; t < threads; ++t) {
    row_top[static_cast<std::size_t>(t)] = y;
    y += levels[static_cast<std::size_t>(t)] * kLevelHeight + kRowGap;
  }
  const int width = 1600, right = width - 24, height = y + 110;
  Canvas canvas(width, height);
  const double ms = static_cast<double>(end - begin) * 1e-6;
  const auto x_of = [&](std::int64_t ns) {
    const double f = static_cast<double>(std::clamp(ns, begin, end) - begin) / static_cast<double>(end - begin);
    return kLeft + static_cast<int>(f * (right - kLeft));
  };
  char title[160];
  std::snprintf(title, sizeof title, "xgrad profile: one step, %.2f ms, %d thread%s", ms, threads,
                threads == 1 ? "" : "s");
  canvas.text(kLeft, 16, title, kBlack, 2);
  for (int t = 0; t < threads; ++t) {
    const int top = row_top[static_cast<std::size_t>(t)], h = levels[static_cast<std::size_t>(t)] * kLevelHeight;
    canvas.fill(kLeft, top, right - kLeft, h, kLightGrey);
    canvas.text(8, top + 4, t == 0 ? std::string("caller") : xgrad::str("thread ", t), kBlack, 2);
  }
  for (const xgrad::ProfileSpan* s : drawn) {
    const int level = s->depth - top_depth[static_cast<std::size_t>(s->thread)];
    if (level >= kMaxLevels) continue;
    const int x0 = x_of(s->begin_ns), x1 = std::max(x0 + 1, x_of(s->end_ns));
    const int top = row_top[static_cast<std::size_t>(s->thread)] + level * kLevelHeight;
    canvas.fill(x0, top + 1, x1 - x0, kLevelHeight - 2, color_of(*s));
    const std::string label = s->name.rfind("pool task: ", 0) == 0 ? s->name.substr(11) : s->name;
    if (Canvas::text_width(label) + 4 < x1 - x0) canvas.text(x0 + 2, top + 5, label, kBlack);
  }
  // The time axis, in ms from the step's start, and the legend.
  const int axis = y + 4;
  canvas.line(kLeft, axis, right, axis, kBlack);
  for (const double v : axis_ticks(0.0, ms, 10)) {
    const int x = kLeft + static_cast<int>(v / ms * (right - kLeft));
    canvas.line(x, axis, x, axis + 6, kBlack);
    canvas.text(x - Canvas::text_width(tick_label(v), 2) / 2, axis + 10, tick_label(v), kBlack, 2);
  }
  canvas.text(right - Canvas::text_width("ms", 2), axis + 30, "ms", kBlack, 2);
  int x = kLeft;
  for (const char* kind : {"forward", "backward", "product", "engine", "optimizer", "pool wait"}) {
    canvas.fill(x, height - 34, 18, 18, kKindColors.at(kind));
    canvas.text(x + 24, height - 32, kind, kBlack, 2);
    x += 24 + Canvas::text_width(kind, 2) + 30;
  }
  canvas.text(x, height - 32, "(lighter: an op's share on another thread)", kBlack, 2);
  canvas.write_png(path, flag);
}

}  // namespace tools
