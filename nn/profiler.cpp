#include "xgrad/nn/profiler.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "xgrad/autograd/error.hpp"
#include "xgrad/autograd/files.hpp"

namespace xgrad {

namespace {

using profile::Event;
using profile::Kind;
using profile::ThreadLog;

enum class Phase { none, forward, backward };

// What the analysis knows of one event: its parent among all events of its thread, the
// nearest kept (named) event at or above it, its phase, and the time its kept children took.
struct Place {
  std::int64_t parent = -1, kept = -1;
  Phase phase = Phase::none;
  std::int64_t children_ns = 0;
  int depth = 0;  // kept events above it
};

bool kept(const Event& e) { return e.name != nullptr; }
std::int64_t duration(const Event& e) { return e.end_ns - e.begin_ns; }
// Whether `open`, which opened before `next` on the same thread, ended before it began
// (else it contains `next`: scopes nest on a thread).
bool ended_before(const Event& open, const Event& next) {
  return open.end_ns <= next.begin_ns && open.end_ns < next.end_ns;
}

// Parents and kept ancestors by walking a thread's events in the order they opened (scopes
// nest on a thread), then phases: an op's own, a pool task its owner's, else its parent's.
std::vector<std::vector<Place>> analyse(const std::vector<ThreadLog>& threads) {
  std::vector<std::vector<Place>> places(threads.size());
  for (std::size_t t = 0; t < threads.size(); ++t) {
    const auto& events = threads[t].events;
    std::vector<Place>& place = places[t];
    place.resize(events.size());
    std::vector<std::int64_t> open;
    for (std::size_t i = 0; i < events.size(); ++i) {
      while (!open.empty() && ended_before(events[static_cast<std::size_t>(open.back())], events[i])) open.pop_back();
      Place& p = place[i];
      p.parent = open.empty() ? -1 : open.back();
      const std::int64_t above = p.parent < 0 ? -1 : place[static_cast<std::size_t>(p.parent)].kept;
      p.kept = kept(events[i]) ? static_cast<std::int64_t>(i) : above;
      if (kept(events[i]) && above >= 0) {
        place[static_cast<std::size_t>(above)].children_ns += duration(events[i]);
        p.depth = place[static_cast<std::size_t>(above)].depth + 1;
      }
      open.push_back(static_cast<std::int64_t>(i));
    }
  }
  const auto owner_phase = [&](const profile::EventRef& owner) {
    if (owner.thread < 0 || static_cast<std::size_t>(owner.thread) >= threads.size()) return Phase::none;
    const auto& p = places[static_cast<std::size_t>(owner.thread)];
    return owner.index >= 0 && static_cast<std::size_t>(owner.index) < p.size()
               ? p[static_cast<std::size_t>(owner.index)].phase
               : Phase::none;
  };
  for (const bool tasks : {false, true})  // owners' phases first, then the tasks'
    for (std::size_t t = 0; t < threads.size(); ++t)
      for (std::size_t i = 0; i < threads[t].events.size(); ++i) {
        const Event& e = threads[t].events[i];
        Place& p = places[t][i];
        const Phase inherited = p.parent < 0 ? Phase::none : places[t][static_cast<std::size_t>(p.parent)].phase;
        if (e.kind == Kind::forward && kept(e))  // a dispatch that recorded no op is not one
          p.phase = Phase::forward;
        else if (e.kind == Kind::backward)
          p.phase = Phase::backward;
        else if (e.kind == Kind::pool_task)
          p.phase = tasks ? owner_phase(e.owner) : Phase::none;
        else
          p.phase = inherited;
      }
  return places;
}

// A table row's kind: the event's, with an op's forward and backward in one row.
const char* category(Kind kind) {
  return kind == Kind::forward || kind == Kind::backward ? "op" : profile::kind_name(kind);
}

double ms(std::int64_t ns) { return static_cast<double>(ns) * 1e-6; }

}  // namespace

Profiler::Profiler() { profile::start(); }

Profiler::~Profiler() {
  if (recording_) profile::stop();
}

void Profiler::stop() {
  if (!recording_) return;
  wall_ns_ = profile::now_ns();
  peak_bytes_ = profile::peak_bytes();
  threads_ = profile::stop();
  recording_ = false;
}

const std::vector<profile::ThreadLog>& Profiler::threads() {
  stop();
  return threads_;
}

double Profiler::wall_ms() {
  stop();
  return ms(wall_ns_);
}

std::int64_t Profiler::peak_bytes() {
  stop();
  return peak_bytes_;
}

std::vector<ProfileRow> Profiler::rows(bool by_shape) {
  stop();
  const std::vector<std::vector<Place>> places = analyse(threads_);
  std::map<std::tuple<std::string, std::string, std::string>, ProfileRow> groups;
  const auto row_of = [&](const Event& e) -> ProfileRow& {
    const std::string shapes = by_shape && (e.kind == Kind::forward || e.kind == Kind::product) ? describe(e) : "";
    ProfileRow& row = groups[{e.name, category(e.kind), shapes}];
    row.name = e.name;
    row.kind = category(e.kind);
    row.shapes = shapes;
    return row;
  };
  const auto event_at = [&](const profile::EventRef& ref) -> const Event* {
    if (ref.thread < 0 || static_cast<std::size_t>(ref.thread) >= threads_.size()) return nullptr;
    const ThreadLog& log = threads_[static_cast<std::size_t>(ref.thread)];
    if (ref.index < 0 || static_cast<std::size_t>(ref.index) >= log.events.size()) return nullptr;
    const std::int64_t k = places[static_cast<std::size_t>(ref.thread)][static_cast<std::size_t>(ref.index)].kept;
    return k < 0 ? nullptr : &log.events[static_cast<std::size_t>(k)];
  };
  ProfileRow outside, idle;
  outside.name = "outside events (the caller between ops)", outside.kind = "outside events";
  idle.name = "idle (pool workers waiting for work)", idle.kind = "idle";
  for (std::size_t t = 0; t < threads_.size(); ++t) {
    std::int64_t covered = 0;
    for (std::size_t i = 0; i < threads_[t].events.size(); ++i) {
      const Event& e = threads_[t].events[i];
      const Place& p = places[t][i];
      if (!kept(e)) continue;
      if (p.parent < 0 || places[t][static_cast<std::size_t>(p.parent)].kept < 0) covered += duration(e);
      const std::int64_t self = duration(e) - p.children_ns;
      const Event* owner = e.kind == Kind::pool_task ? event_at(e.owner) : nullptr;
      ProfileRow& row = row_of(owner ? *owner : e);
      // A call's total is its time on its thread; a pool task adds to its owner's total
      // unless it ran inside the owner's own event (the caller's share of the job).
      const bool nested = p.parent >= 0 && places[t][static_cast<std::size_t>(p.parent)].kept >= 0;
      if (e.kind != Kind::pool_task || !nested) {
        row.total_ms += ms(duration(e));
        if (p.phase == Phase::forward) row.forward_total_ms += ms(duration(e));
        if (p.phase == Phase::backward) row.backward_total_ms += ms(duration(e));
      }
      if (e.kind != Kind::pool_task) {
        ++row.calls;
        row.forward_calls += p.phase == Phase::forward;
        row.backward_calls += p.phase == Phase::backward;
      }
      row.self_ms += ms(self);
      if (p.phase == Phase::forward) row.forward_self_ms += ms(self);
      if (p.phase == Phase::backward) row.backward_self_ms += ms(self);
      row.flops += e.flops;
      row.bytes += e.bytes;
    }
    (t == 0 ? outside : idle).self_ms += ms(wall_ns_ - covered);
  }
  std::vector<ProfileRow> rows;
  for (auto& [key, row] : groups) rows.push_back(std::move(row));
  for (ProfileRow* row : {&outside, &idle})
    if (row->self_ms > 0) rows.push_back(std::move(*row));
  const double thread_ms = ms(wall_ns_) * static_cast<double>(std::max<std::size_t>(1, threads_.size()));
  for (ProfileRow& row : rows) {
    row.share = thread_ms > 0 ? 100.0 * row.self_ms / thread_ms : 0.0;
    row.gflops = row.flops > 0 && row.total_ms > 0 ? row.flops / (row.total_ms * 1e6) : 0.0;
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const ProfileRow& a, const ProfileRow& b) { return a.self_ms > b.self_ms; });
  return rows;
}

std::string Profiler::table(bool by_shape, std::size_t max_rows) {
  const std::vector<ProfileRow> all = rows(by_shape);
  char line[512];
  std::snprintf(line, sizeof line, "profile: %zu thread%s, %.3f ms wall; peak %.1f MiB of op outputs and gradients\n",
                threads_.size(), threads_.size() == 1 ? "" : "s", ms(wall_ns_),
                static_cast<double>(peak_bytes_) / (1 << 20));
  std::string text = line;
  const char* header = "%-44s %-9s %7s %9s %9s %9s %9s %9s %9s %6s %7s %8s\n";
  std::snprintf(line, sizeof line, header, "", "", "calls", "self", "total", "self", "self", "total", "total", "share",
                "GFLOP/s", "made");
  text += line;
  std::snprintf(line, sizeof line, header, "name", "kind", "", "ms", "ms", "fwd ms", "bwd ms", "fwd ms", "bwd ms", "%",
                "", "MiB");
  text += line;
  ProfileRow rest;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const ProfileRow& r = all[i];
    if (i >= max_rows) {
      rest.self_ms += r.self_ms, rest.share += r.share;
      continue;
    }
    std::string name = r.shapes.empty() ? r.name : r.name + " " + r.shapes;
    if (name.size() > 44) name = name.substr(0, 41) + "...";
    const std::string gflops = r.gflops > 0 ? str(static_cast<long long>(r.gflops + 0.5)) : "";
    char made[16] = "";  // MiB of op outputs and gradients the row's calls made
    if (r.bytes > 0) std::snprintf(made, sizeof made, "%.1f", static_cast<double>(r.bytes) / (1 << 20));
    std::snprintf(line, sizeof line, "%-44s %-9s %7lld %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %5.1f%% %7s %8s\n",
                  name.c_str(), r.kind.substr(0, 9).c_str(), static_cast<long long>(r.calls), r.self_ms, r.total_ms,
                  r.forward_self_ms, r.backward_self_ms, r.forward_total_ms, r.backward_total_ms, r.share,
                  gflops.c_str(), made);
    text += line;
  }
  if (all.size() > max_rows) {
    std::snprintf(line, sizeof line, "%-44s %-9s %7s %9.3f %9s %9s %9s %9s %9s %5.1f%%\n",
                  str("(", all.size() - max_rows, " more rows)").c_str(), "", "", rest.self_ms, "", "", "", "", "",
                  rest.share);
    text += line;
  }
  return text;
}

std::vector<ProfileSpan> Profiler::spans() {
  stop();
  const std::vector<std::vector<Place>> places = analyse(threads_);
  std::vector<ProfileSpan> spans;
  for (std::size_t t = 0; t < threads_.size(); ++t)
    for (std::size_t i = 0; i < threads_[t].events.size(); ++i) {
      const Event& e = threads_[t].events[i];
      if (!kept(e)) continue;
      const Place& p = places[t][i];
      ProfileSpan span{static_cast<int>(t),        p.depth,     e.begin_ns, e.end_ns, e.name,
                       profile::kind_name(e.kind), describe(e), "",         e.flops,  e.bytes};
      if (p.phase != Phase::none) span.phase = p.phase == Phase::forward ? "forward" : "backward";
      if (e.kind == Kind::pool_task && e.owner.thread >= 0) {
        const std::int64_t k =
            places[static_cast<std::size_t>(e.owner.thread)][static_cast<std::size_t>(e.owner.index)].kept;
        if (k >= 0) {
          const Event& owner = threads_[static_cast<std::size_t>(e.owner.thread)].events[static_cast<std::size_t>(k)];
          span.name = str("pool task: ", owner.name);
          span.kind = profile::kind_name(owner.kind);
        }
      }
      spans.push_back(std::move(span));
    }
  return spans;
}

void Profiler::save_trace(const std::string& path) {
  const std::vector<ProfileSpan> all = spans();
  nlohmann::json events = nlohmann::json::array();
  const auto us = [](std::int64_t ns) { return static_cast<double>(ns) * 1e-3; };
  for (std::size_t t = 0; t < threads_.size(); ++t)
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 1},
                      {"tid", t},
                      {"args", {{"name", t == 0 ? std::string("caller") : str("thread ", t)}}}});
  // Per thread, begin and end events in time order: each end before the next begin it
  // does not contain (spans come in the order they opened, thread by thread).
  std::vector<const ProfileSpan*> open;
  const auto close_before = [&](const ProfileSpan* next) {
    while (!open.empty() && (!next || next->thread != open.back()->thread ||
                             (open.back()->end_ns <= next->begin_ns && open.back()->end_ns < next->end_ns))) {
      events.push_back({{"ph", "E"}, {"pid", 1}, {"tid", open.back()->thread}, {"ts", us(open.back()->end_ns)}});
      open.pop_back();
    }
  };
  for (const ProfileSpan& span : all) {
    close_before(&span);
    nlohmann::json args = nlohmann::json::object();
    if (!span.detail.empty()) args["detail"] = span.detail;
    if (!span.phase.empty()) args["phase"] = span.phase;
    if (span.flops > 0) args["flops"] = span.flops;
    if (span.bytes > 0) args["bytes"] = span.bytes;
    events.push_back({{"name", span.name},
                      {"cat", span.kind},
                      {"ph", "B"},
                      {"pid", 1},
                      {"tid", span.thread},
                      {"ts", us(span.begin_ns)},
                      {"args", std::move(args)}});
    open.push_back(&span);
  }
  close_before(nullptr);
  const nlohmann::json trace{{"traceEvents", std::move(events)},
                             {"displayTimeUnit", "ms"},
                             {"otherData", {{"producer", "xgrad::Profiler"}, {"peak_bytes", peak_bytes_}}}};
  write_file_atomically(path, trace.dump(), str("profile trace '", path, "'"));
}

}  // namespace xgrad
