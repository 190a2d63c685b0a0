#pragma once
// Learning-rate schedules. A schedule takes each parameter group's rate when it is made
// as the group's base rate (and the optimizer keeps it as the group's initial_lr, as
// PyTorch does, in its state dict too), sets rate(0) at once, and after each
// optimizer.step() its own step() sets rate(k) for the next update: update k (counting
// from 0) runs at rate(k), computed from each group's own base (as PyTorch's schedulers do).
//
// Resuming: make the optimizer and its schedule, load the optimizer's state (the saved
// run's base rates come with it, whatever rates the optimizer was made with: the schedule
// takes them; one made after the load too), then set_updates(k) with the updates done.
//
// An optimizer has one schedule at a time (the base rates it saves are that schedule's):
// a second made while the first lives is an Error; combine rates in one LambdaLR. A
// schedule whose constructor throws leaves the base rates as they were.
//
//   optim::WarmupCosineLR schedule(adam, 100, 5000);
//   for (...) { ...; adam.step(); schedule.step(); }
//
// A schedule of your own: LambdaLR with its rate as a function, as PyTorch's LambdaLR;
// or a subclass that overrides rate_from and ends its constructor with apply() (the base
// class's constructor cannot set rate(0): the subclass's rate_from is not there yet). A
// subclass that does not is an Error at its first step().

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "xgrad/optim/optimizer.hpp"

namespace xgrad::optim {

class LRSchedule {
 public:
  explicit LRSchedule(Optimizer& optimizer);
  virtual ~LRSchedule();
  LRSchedule(const LRSchedule&) = delete;
  LRSchedule& operator=(const LRSchedule&) = delete;
  void step();  // advance to the next update and set its rate
  // The rate of update `update` for a group whose base rate is `base`.
  virtual double rate_from(double base, std::int64_t update) const = 0;
  double rate(std::int64_t update) const { return rate_from(base_lr(), update); }  // the first group's
  std::int64_t updates() const { return updates_; }
  double base_lr(std::size_t group = 0) const;  // the group's base rate
  // Continue a resumed run: the next update is `update`.
  void set_updates(std::int64_t update);

 protected:
  void apply();  // sets every group's rate for update updates_
  Optimizer& optimizer_;
  std::int64_t updates_ = 0;

 private:
  std::shared_ptr<Optimizer::ScheduleBases> bases_;  // the optimizer's, shared: it may go first
  Optimizer::ScheduleBases before_;                  // as they were, restored if never applied
  bool applied_ = false;                             // whether rate(0) was set, by the subclass's constructor
};

// base * factor(update): a schedule as a function, as PyTorch's LambdaLR.
//   optim::LambdaLR warmup(sgd, [](std::int64_t u) { return std::min(1.0, (u + 1) / 100.0); });
class LambdaLR : public LRSchedule {
 public:
  LambdaLR(Optimizer& optimizer, std::function<double(std::int64_t update)> factor);
  double rate_from(double base, std::int64_t update) const override;

 private:
  std::function<double(std::int64_t)> factor_;
};

// The base rate throughout.
class ConstantLR : public LRSchedule {
 public:
  explicit ConstantLR(Optimizer& optimizer);
  double rate_from(double base, std::int64_t update) const override;
};

// base * gamma^floor(update / step_size).
class StepLR : public LRSchedule {
 public:
  StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma = 0.1);
  double rate_from(double base, std::int64_t update) const override;

 private:
  std::int64_t step_size_;
  double gamma_;
};

// Linear warmup from base / warmup to base over `warmup` updates, then a cosine from
// base down to min_lr at `total` updates (and min_lr after).
class WarmupCosineLR : public LRSchedule {
 public:
  WarmupCosineLR(Optimizer& optimizer, std::int64_t warmup, std::int64_t total, double min_lr = 0.0);
  double rate_from(double base, std::int64_t update) const override;

 private:
  std::int64_t warmup_, total_;
  double min_lr_;
};

// The Annotated Transformer's "Noam" rate, times the base rate (set the optimizer's
// rate to 1 for the paper's values):
//   base * factor * d_model^-0.5 * min(s^-0.5, s * warmup^-1.5),   s = max(update, 1)
class NoamLR : public LRSchedule {
 public:
  NoamLR(Optimizer& optimizer, std::int64_t d_model, std::int64_t warmup, double factor = 1.0);
  double rate_from(double base, std::int64_t update) const override;

 private:
  double d_model_;
  std::int64_t warmup_;
  double factor_;
};

}  // namespace xgrad::optim
