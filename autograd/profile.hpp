#pragma once
// The events a profiler records, and the scopes that open them. xgrad::Profiler
// (nn/profiler.hpp) starts and stops a recording and turns it into a table, a trace and a
// timeline; the library reports into it from the places everything passes through (the
// op recorder, the engine, every BLAS or oneDNN call, the pool, the optimizers). Code of
// your own marks its regions the same way:
//
//   { const xgrad::profile::Scope region(xgrad::profile::Kind::scope, "data loading"); ... }
//
// Each thread appends to a log of its own (no locks after its first event); with no
// recording running every scope is one relaxed load and a branch.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace xgrad {

namespace profile {

enum class Kind : std::uint8_t { forward, backward, product, engine, pool_task, pool_wait, optimizer, step, scope };
const char* kind_name(Kind kind);

// Where an event sits: its thread's index (0: the thread that started the recording, then
// in order of first event) and its index in that thread's log.
struct EventRef {
  int thread = -1;
  std::int64_t index = -1;
};

struct Event {
  const char* name = nullptr;  // a string that outlives the program (an op's literal); null: dropped
  Kind kind = Kind::scope;
  std::int64_t begin_ns = 0, end_ns = -1;  // since the recording started; end -1: still open
  std::string_view detail;                 // an op's input shapes, dtype and precision (in its log's text)
  std::int64_t m = 0, k = 0, n = 0;        // a product's op(A) [m, k] op(B) [k, n] (formatted when shown)
  double flops = 0;                        // where known (products)
  std::int64_t bytes = 0;                  // allocated (an op's output, a gradient buffer)
  EventRef owner;                          // a pool task's: the event that started the job
};

// The profiler keeps what it records in memory mapped apart from malloc's heap. A recording
// holds millions of events; kept on the heap they would sit between the tensors' blocks, so
// that memory one step frees could no longer serve the next, which would touch fresh pages
// (a page fault every 4 KiB) and run slower while profiled than it does otherwise.
namespace detail {
void* map_pages(std::size_t bytes);  // zero-filled and populated; std::bad_alloc when refused
void unmap_pages(void* pages, std::size_t bytes);
}  // namespace detail

template <class T>
struct MappedAllocator {
  using value_type = T;
  MappedAllocator() = default;
  template <class U>
  MappedAllocator(const MappedAllocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(detail::map_pages(n * sizeof(T))); }
  void deallocate(T* pages, std::size_t n) { detail::unmap_pages(pages, n * sizeof(T)); }
  template <class U>
  bool operator==(const MappedAllocator<U>&) const {
    return true;
  }
};

// Text that lives as long as its log (events' details), in mapped chunks that never move.
class TextArena {
 public:
  std::string_view keep(std::string_view text);

 private:
  std::vector<std::vector<char, MappedAllocator<char>>> chunks_;  // each filled within its capacity
};

// One thread's events, in the order they opened.
struct ThreadLog {
  int thread = 0;
  std::vector<Event, MappedAllocator<Event>> events;
  std::vector<std::int64_t> open;  // indices of events not yet closed, innermost last
  TextArena text;                  // the events' details
};

namespace detail {
extern std::atomic<bool> recording;
}
inline bool active() { return detail::recording.load(std::memory_order_relaxed); }

// Opens an event on the calling thread (nothing when not recording: an empty ref).
EventRef begin(Kind kind, const char* name);
void end(EventRef ref);
Event* find(EventRef ref);  // on the calling thread's log; null when not recording
// Sets an open event's detail (what the table groups by with by_shape), copied into the
// calling thread's log: nothing when not recording.
void set_detail(EventRef ref, std::string_view detail);

// An event from here to the end of the scope.
class Scope {
 public:
  Scope(Kind kind, const char* name) : ref_(active() ? begin(kind, name) : EventRef{}) {}
  ~Scope() {
    if (ref_.index >= 0) end(ref_);
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  Event* event() const { return ref_.index >= 0 ? find(ref_) : nullptr; }
  void describe(std::string_view detail) const {
    if (ref_.index >= 0) set_detail(ref_, detail);
  }

 private:
  EventRef ref_;
};

// What an event was called with: an op's inputs, a product's "m x k x n".
std::string describe(const Event& event);

// The recording (xgrad::Profiler's): start() begins one (one at a time, an Error
// otherwise); stop() ends it and returns every thread's log (call it when no op is
// running).
void start();
std::vector<ThreadLog> stop();
std::int64_t now_ns();      // since the recording started
std::int64_t peak_bytes();  // op outputs and gradients made while recording, alive at once

}  // namespace profile
}  // namespace xgrad
