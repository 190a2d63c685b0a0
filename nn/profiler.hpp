#pragma once
// xgrad::Profiler: where the time goes. While one is alive it records, on every thread,
// each op's forward and backward (op, input shapes, dtype, precision), the engine's own
// work (the graph walk, gradients added), every matrix product (its kernels, m x k x n,
// FLOPs), the pool's tasks (each thread's share of a job, counted to the op that started
// it) and the caller's waits, optimizer steps, and the bytes of op outputs and gradients
// (and their peak). With none alive, each of those places costs one relaxed load.
//
//   xgrad::Profiler profiler;
//   for (int step = 0; step < 3; ++step) { ... forward, backward, optimizer.step() ... }
//   profiler.stop();
//   std::cout << profiler.table();
//   profiler.save_trace("step.json");  // chrome://tracing or https://ui.perfetto.dev
//
// One profiler records at a time. Profiling changes no result: it only reads clocks.

#include <cstdint>
#include <string>
#include <vector>

#include "xgrad/autograd/profile.hpp"

namespace xgrad {

// One line of the table: an op (forward and backward), a product's kernels, the engine's
// or the optimizer's work, the pool's waits, or time no event accounts for.
struct ProfileRow {
  std::string name;
  std::string kind;    // "op", "product", "engine", "optimizer", "pool wait", "step", "outside events", "idle"
  std::string shapes;  // the inputs' shapes, when grouped by shape
  std::int64_t forward_calls = 0, backward_calls = 0, calls = 0;  // calls: of any phase
  double forward_self_ms = 0, backward_self_ms = 0;               // time in the row itself, nothing it called
  double forward_total_ms = 0, backward_total_ms = 0;
  double self_ms = 0;   // every phase
  double total_ms = 0;  // every phase, with what it called
  double share = 0;     // percent of the profiled thread time (threads x wall): rows add to 100
  double gflops = 0;    // FLOPs / total time, where FLOPs are known (products)
  double flops = 0;
  std::int64_t bytes = 0;  // allocated by the row's calls
};

// One event as drawn: its thread, its nesting depth there, its interval, and what it was.
// A pool task is named and kinded after the op (or step) whose job it ran.
struct ProfileSpan {
  int thread = 0, depth = 0;
  std::int64_t begin_ns = 0, end_ns = 0;  // since the profiler started
  std::string name;
  std::string kind;    // forward, backward, product, engine, pool wait, optimizer, step, scope
  std::string detail;  // input shapes, a product's m x k x n
  std::string phase;   // "forward", "backward", or empty
  double flops = 0;
  std::int64_t bytes = 0;
};

// Marks one training step for the profile (the timeline draws the last): its time outside
// any op shows as the "step" row.
class ProfileStep {
 public:
  ProfileStep() : scope_(profile::Kind::step, "step") {}

 private:
  profile::Scope scope_;
};

class Profiler {
 public:
  Profiler();   // starts recording; an Error if another profiler is recording
  ~Profiler();  // stops recording if stop() was not called
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Ends the recording; call it between ops, on the thread that made the profiler. The
  // outputs below need it (they stop the recording themselves if it still runs).
  void stop();

  // Rows sorted by self time, the largest first; by_shape: one row per op and input shapes.
  std::vector<ProfileRow> rows(bool by_shape = false);
  // The rows as text: a header with the wall time, threads and peak bytes, then up to
  // max_rows rows (the rest summed into one line).
  std::string table(bool by_shape = false, std::size_t max_rows = 25);
  // The Chrome trace event format (JSON): one track per thread, begin and end events
  // nested within it; written atomically, an Error naming `path` when it cannot be.
  void save_trace(const std::string& path);

  std::vector<ProfileSpan> spans();                  // every event kept, thread by thread, in the order they began
  const std::vector<profile::ThreadLog>& threads();  // every thread's events, as recorded
  double wall_ms();
  std::int64_t peak_bytes();  // op outputs and gradients made while recording, alive at once

 private:
  bool recording_ = true;
  std::int64_t wall_ns_ = 0, peak_bytes_ = 0;
  std::vector<profile::ThreadLog> threads_;
};

}  // namespace xgrad
