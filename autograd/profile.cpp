#include "xgrad/autograd/detail/profile.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <new>
#include <utility>

#include "xgrad/autograd/error.hpp"

namespace xgrad::profile {

std::atomic<bool> detail::recording{false};

namespace {

using Clock = std::chrono::steady_clock;

// Events a log first maps room for (about 400 KiB); it doubles from there.
constexpr std::size_t kEventsReserved = 4096;
// Each chunk of a log's text.
constexpr std::size_t kTextChunkBytes = std::size_t{1} << 20;

// The session: its logs, one per thread that reported an event, owned here so that they
// outlive threads that end first.
struct Session {
  std::mutex mutex;  // guards logs (a thread's first event) and start/stop
  std::vector<std::unique_ptr<ThreadLog>> logs;
  std::uint64_t id = 0;  // 0: none yet
  Clock::time_point started;
  std::atomic<std::int64_t> live_bytes{0}, peak{0};
};

Session& session() {
  static Session s;
  return s;
}

// The calling thread's log in the current session (made on its first event).
struct ThreadSlot {
  ThreadLog* log = nullptr;
  std::uint64_t session = 0;
};
thread_local ThreadSlot t_slot;

ThreadLog& my_log() {
  Session& s = session();
  if (t_slot.session != s.id || !t_slot.log) {
    std::lock_guard lock(s.mutex);
    auto log = std::make_unique<ThreadLog>();
    log->thread = static_cast<int>(s.logs.size());
    log->events.reserve(kEventsReserved);
    t_slot = {log.get(), s.id};
    s.logs.push_back(std::move(log));
  }
  return *t_slot.log;
}

}  // namespace

void* detail::map_pages(std::size_t bytes) {
  // MAP_POPULATE: the pages are faulted in here, at once, not one by one inside the
  // events that fill them.
  void* pages = mmap(nullptr, std::max<std::size_t>(bytes, 1), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (pages == MAP_FAILED) throw std::bad_alloc();
  return pages;
}

void detail::unmap_pages(void* pages, std::size_t bytes) { munmap(pages, std::max<std::size_t>(bytes, 1)); }

std::string_view TextArena::keep(std::string_view text) {
  if (chunks_.empty() || chunks_.back().capacity() - chunks_.back().size() < text.size())
    chunks_.emplace_back().reserve(std::max(kTextChunkBytes, text.size()));
  auto& chunk = chunks_.back();
  const std::size_t at = chunk.size();
  chunk.insert(chunk.end(), text.begin(), text.end());  // within its capacity: the chunk stays put
  return {chunk.data() + at, text.size()};
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::forward:
      return "forward";
    case Kind::backward:
      return "backward";
    case Kind::product:
      return "product";
    case Kind::engine:
      return "engine";
    case Kind::pool_task:
      return "pool task";
    case Kind::pool_wait:
      return "pool wait";
    case Kind::optimizer:
      return "optimizer";
    case Kind::step:
      return "step";
    case Kind::scope:
      return "scope";
  }
  return "?";
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - session().started).count();
}

EventRef begin(Kind kind, const char* name) {
  if (!active()) return {};
  ThreadLog& log = my_log();
  Event& e = log.events.emplace_back();
  e.name = name;
  e.kind = kind;
  e.begin_ns = now_ns();
  const auto index = static_cast<std::int64_t>(log.events.size()) - 1;
  log.open.push_back(index);
  return {log.thread, index};
}

void end(EventRef ref) {
  if (!active() || t_slot.session != session().id || !t_slot.log) return;  // the session ended meanwhile
  ThreadLog& log = *t_slot.log;
  if (ref.thread != log.thread || ref.index >= static_cast<std::int64_t>(log.events.size())) return;
  log.events[static_cast<std::size_t>(ref.index)].end_ns = now_ns();
  // Events close innermost first; an exception unwinding scopes keeps that order too.
  while (!log.open.empty()) {
    const std::int64_t top = log.open.back();
    log.open.pop_back();
    if (top == ref.index) break;
  }
}

Event* find(EventRef ref) {
  if (!active() || t_slot.session != session().id || !t_slot.log || ref.thread != t_slot.log->thread) return nullptr;
  if (ref.index < 0 || ref.index >= static_cast<std::int64_t>(t_slot.log->events.size())) return nullptr;
  return &t_slot.log->events[static_cast<std::size_t>(ref.index)];
}

void set_detail(EventRef ref, std::string_view detail) {
  if (Event* event = find(ref)) event->detail = t_slot.log->text.keep(detail);
}

EventRef innermost() {
  if (!active()) return {};
  ThreadLog& log = my_log();
  if (log.open.empty()) return {};
  return {log.thread, log.open.back()};
}

std::string describe(const Event& event) {
  return event.kind == Kind::product ? str(event.m, " x ", event.k, " x ", event.n) : std::string(event.detail);
}

void op_recorded(const char* op, std::string_view detail, std::int64_t output_bytes) {
  if (!active()) return;
  ThreadLog& log = my_log();
  if (log.open.empty()) return;
  Event& e = log.events[static_cast<std::size_t>(log.open.back())];
  if (e.kind != Kind::forward || e.name) return;  // not an op's own dispatch
  e.name = op;
  e.detail = log.text.keep(detail);
  e.bytes = output_bytes;
}

std::uint64_t allocated(std::int64_t bytes) {
  Session& s = session();
  const std::int64_t live = s.live_bytes.fetch_add(bytes) + bytes;
  std::int64_t peak = s.peak.load();
  while (live > peak && !s.peak.compare_exchange_weak(peak, live)) {
  }
  return s.id;
}

void released(std::int64_t bytes, std::uint64_t id) {
  if (id == session().id) session().live_bytes.fetch_sub(bytes);
}

std::int64_t peak_bytes() { return session().peak.load(); }

void start() {
  Session& s = session();
  std::lock_guard lock(s.mutex);
  XGRAD_CHECK(!active(), "Profiler", "another profiler is already recording; one at a time");
  s.logs.clear();
  ++s.id;
  s.live_bytes = 0;
  s.peak = 0;
  s.started = Clock::now();
  detail::recording.store(true);
}

std::vector<ThreadLog> stop() {
  Session& s = session();
  std::lock_guard lock(s.mutex);
  detail::recording.store(false);
  const std::int64_t end = now_ns();
  std::vector<ThreadLog> logs;
  for (auto& log : s.logs) {
    for (Event& e : log->events)
      if (e.end_ns < 0) e.end_ns = end;  // still open when recording stopped
    logs.push_back(std::move(*log));
  }
  s.logs.clear();
  return logs;
}

}  // namespace xgrad::profile
