#pragma once
// Internal: the events xgrad::Profiler (nn/profiler.hpp) collects, and the hooks through
// which the library reports them. Each thread appends to a log of its own (no locks after
// its first event); with no profiler alive every hook is one relaxed load and a branch.
//
// What reports what: dispatch() opens a forward event that record() names after its op
// (an op's dispatch that records nothing leaves no event); the engine its graph walk, each
// node's backward and every gradient it adds; every BLAS or oneDNN call its product; the
// pool each thread's share of a job (owned by the event that started the job) and the
// caller's wait for the others; optimizers their step.

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace xgrad {

namespace profile {

enum class Kind : std::uint8_t { forward, backward, product, engine, pool_task, pool_wait, optimizer, step, scope };
const char* kind_name(Kind kind);

// Where an event sits: its thread's index (0: the thread that started the profiler, then
// in order of first event) and its index in that thread's log.
struct EventRef {
  int thread = -1;
  std::int64_t index = -1;
};

struct Event {
  const char* name = nullptr;  // a string that outlives the program (an op's literal); null: dropped
  Kind kind = Kind::scope;
  std::int64_t begin_ns = 0, end_ns = -1;  // since the profiler started; end -1: still open
  std::string detail;                      // an op's input shapes, dtype and precision
  std::int64_t m = 0, k = 0, n = 0;        // a product's op(A) [m, k] op(B) [k, n] (formatted when shown)
  double flops = 0;                        // where known (products)
  std::int64_t bytes = 0;                  // allocated (an op's output, a gradient buffer)
  EventRef owner;                          // a pool task's: the event that started the job
};

// One thread's events, in the order they opened.
struct ThreadLog {
  int thread = 0;
  std::vector<Event> events;
  std::vector<std::int64_t> open;  // indices of events not yet closed, innermost last
};

namespace detail {
extern std::atomic<bool> recording;
}
inline bool active() { return detail::recording.load(std::memory_order_relaxed); }

// Opens an event on the calling thread (nothing when not recording: an empty ref).
EventRef begin(Kind kind, const char* name);
void end(EventRef ref);
Event* find(EventRef ref);  // on the calling thread's log; null when not recording
// The calling thread's innermost open event (a job's owner).
EventRef innermost();

class Scope {
 public:
  Scope(Kind kind, const char* name) : ref_(active() ? begin(kind, name) : EventRef{}) {}
  ~Scope() {
    if (ref_.index >= 0) end(ref_);
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  Event* event() const { return ref_.index >= 0 ? find(ref_) : nullptr; }

 private:
  EventRef ref_;
};

// A forward op's event: opened unnamed by dispatch(), named by record() (op_recorded).
class OpScope {
 public:
  OpScope() : ref_(active() ? begin(Kind::forward, nullptr) : EventRef{}) {}
  ~OpScope() {
    if (ref_.index >= 0) end(ref_);
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  EventRef ref_;
};
// `detail` describes the op's inputs (what the table groups by with by_shape), e.g.
// "[2, 3] float32, [3] float32 (bf16 products)".
void op_recorded(const char* op, std::string detail, std::int64_t output_bytes);
// What an event was called with: an op's inputs, a product's "m x k x n".
std::string describe(const Event& event);

// Bytes of op outputs and gradients alive that were made while recording, and their peak.
// released() counts only for the session that allocated (`session`).
std::uint64_t allocated(std::int64_t bytes);
void released(std::int64_t bytes, std::uint64_t session);

// The recording: start() begins a session (one at a time); stop() ends it and returns
// every thread's log (call it when no op is running).
void start();
std::vector<ThreadLog> stop();
std::int64_t now_ns();  // since the session started
std::int64_t peak_bytes();

}  // namespace profile
}  // namespace xgrad
