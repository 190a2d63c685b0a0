#pragma once
// Internal: what watches the graph as ops record it and the engine runs it, all in one
// place. The recorder (record.hpp) and the engine (engine.cpp) call these hooks and know
// nothing of what hangs on them:
//
//   - the version check: an op notes its inputs' and output's change counts when it
//     records, and its backward refuses values changed in place since (always on);
//   - the profiler: an event per op's forward and per node's backward (only while a
//     Profiler records);
//   - anomaly mode: no NaN or Inf out of an op's forward or backward (only inside an
//     AnomalyModeGuard);
//   - an OpObserver: what a function's ops read and made (only while recompute() runs
//     the function).
//
// Off (no recording, no anomaly mode, no observer), a forward costs one relaxed load in
// ForwardScope, one in op_recorded and two thread-local reads; a backward the version
// check, one relaxed load and a thread-local read.

#include <vector>

#include "xgrad/autograd/detail/profile.hpp"
#include "xgrad/autograd/node.hpp"

namespace xgrad::hooks {

// An op's forward, from dispatch_op() to its record(): the profiler's forward event,
// opened unnamed here and named by op_recorded (an op that records nothing leaves none).
class ForwardScope {
 public:
  ForwardScope() : ref_(profile::active() ? profile::begin(profile::Kind::forward, nullptr) : profile::EventRef{}) {}
  ~ForwardScope() {
    if (ref_.index >= 0) profile::end(ref_);
  }
  ForwardScope(const ForwardScope&) = delete;
  ForwardScope& operator=(const ForwardScope&) = delete;

 private:
  profile::EventRef ref_;
};

// An op made `node` (its value set; its inputs and backward set when the graph is kept)
// from `inputs`.
void op_recorded(const NodePtr& node, const char* op, const std::vector<Tensor>& inputs);

// While alive, sees every op recorded on the thread that made it, graph kept or not (the
// innermost observer only: an op inside a nested one is its business).
class OpObserver {
 public:
  OpObserver();
  virtual ~OpObserver();
  OpObserver(const OpObserver&) = delete;
  OpObserver& operator=(const OpObserver&) = delete;

  virtual void recorded(const NodePtr& output, const std::vector<Tensor>& inputs) = 0;

 private:
  OpObserver* outer_;
};

// Around one node's backward: before_backward() refuses inputs or an output changed in
// place since the forward; a BackwardEvent is the profiler's event for it;
// after_backward() checks the gradients it added in anomaly mode.
void before_backward(const Node& node);
void after_backward(const Node& node);

class BackwardEvent {
 public:
  explicit BackwardEvent(const Node& node) : ref_(profile::active() ? open(node) : profile::EventRef{}) {}
  ~BackwardEvent() {
    if (ref_.index >= 0) profile::end(ref_);
  }
  BackwardEvent(const BackwardEvent&) = delete;
  BackwardEvent& operator=(const BackwardEvent&) = delete;

 private:
  static profile::EventRef open(const Node& node);  // named by its op, with its inputs' shapes
  profile::EventRef ref_;
};

}  // namespace xgrad::hooks
