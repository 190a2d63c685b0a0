#include "xgrad/optim/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

namespace xgrad::optim {

LRSchedule::LRSchedule(Optimizer& optimizer) : optimizer_(optimizer), base_lr_(optimizer.lr()) {}

void LRSchedule::apply() { optimizer_.set_lr(rate(updates_)); }

void LRSchedule::step() {
  ++updates_;
  apply();
}

void LRSchedule::set_updates(std::int64_t update) {
  XGRAD_CHECK(update >= 0, "LRSchedule", "update ", update, " must be >= 0");
  updates_ = update;
  apply();
}

ConstantLR::ConstantLR(Optimizer& optimizer) : LRSchedule(optimizer) { apply(); }
double ConstantLR::rate(std::int64_t) const { return base_lr_; }

StepLR::StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma)
    : LRSchedule(optimizer), step_size_(step_size), gamma_(gamma) {
  XGRAD_CHECK(step_size > 0, "StepLR", "step_size ", step_size, " must be > 0");
  XGRAD_CHECK(gamma > 0.0 && std::isfinite(gamma), "StepLR", "gamma ", gamma, " must be finite and > 0");
  apply();
}

double StepLR::rate(std::int64_t update) const {
  return base_lr_ * std::pow(gamma_, static_cast<double>(update / step_size_));
}

WarmupCosineLR::WarmupCosineLR(Optimizer& optimizer, std::int64_t warmup, std::int64_t total, double min_lr)
    : LRSchedule(optimizer), warmup_(warmup), total_(total), min_lr_(min_lr) {
  XGRAD_CHECK(warmup >= 0 && total > warmup, "WarmupCosineLR", "needs 0 <= warmup < total, got warmup ", warmup,
              ", total ", total);
  XGRAD_CHECK(min_lr >= 0.0 && min_lr <= base_lr_, "WarmupCosineLR", "min_lr ", min_lr, " must lie in [0, base rate]");
  apply();
}

double WarmupCosineLR::rate(std::int64_t update) const {
  if (update < warmup_) return base_lr_ * static_cast<double>(update + 1) / static_cast<double>(warmup_);
  const double progress = std::min(1.0, static_cast<double>(update - warmup_) / static_cast<double>(total_ - warmup_));
  return min_lr_ + (base_lr_ - min_lr_) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

NoamLR::NoamLR(Optimizer& optimizer, std::size_t d_model, std::int64_t warmup, double factor)
    : LRSchedule(optimizer), d_model_(static_cast<double>(d_model)), warmup_(warmup), factor_(factor) {
  XGRAD_CHECK(d_model != 0 && warmup > 0, "NoamLR", "d_model and warmup must be > 0");
  XGRAD_CHECK(factor > 0.0 && std::isfinite(factor), "NoamLR", "factor ", factor, " must be finite and > 0");
  apply();
}

double NoamLR::rate(std::int64_t update) const {
  const double s = static_cast<double>(std::max<std::int64_t>(update, 1));
  return base_lr_ * factor_ * std::pow(d_model_, -0.5) *
         std::min(std::pow(s, -0.5), s * std::pow(static_cast<double>(warmup_), -1.5));
}

}  // namespace xgrad::optim
