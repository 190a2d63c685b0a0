#include "xgrad/optim/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <utility>

namespace xgrad::optim {

LRSchedule::LRSchedule(Optimizer& optimizer)
    : optimizer_(optimizer), bases_(optimizer.schedule_bases()), before_(*bases_) {
  XGRAD_CHECK(!bases_->scheduled, "LRSchedule", "the ", optimizer.type(),
              " optimizer has a schedule already: one at a time (the base rates its state saves are that "
              "schedule's); combine rates in one LambdaLR");
  for (std::size_t g = 0; g < bases_->rates.size(); ++g) {
    if (!bases_->loaded[g]) bases_->rates[g] = optimizer.group_lr(g);
    bases_->loaded[g] = false;
  }
  bases_->scheduled = true;
}

LRSchedule::~LRSchedule() {
  if (!applied_) {  // a subclass's constructor threw: as if never made
    bases_->rates = before_.rates;
    bases_->loaded = before_.loaded;
  }
  bases_->scheduled = false;
}

double LRSchedule::base_lr(std::size_t group) const {
  XGRAD_CHECK(group < bases_->rates.size(), "LRSchedule", "group ", group, " does not exist (the optimizer has ",
              bases_->rates.size(), ")");
  return *bases_->rates[group];
}

void LRSchedule::apply() {
  for (std::size_t g = 0; g < optimizer_.num_groups(); ++g) {
    const double rate = rate_from(base_lr(g), updates_);
    XGRAD_CHECK(std::isfinite(rate) && rate >= 0.0, "LRSchedule", "the rate of update ", updates_, " for group ", g,
                " (base ", base_lr(g), ") is ", rate, ": it must be finite and >= 0");
    optimizer_.set_group_lr(g, rate);
  }
  applied_ = true;
}

void LRSchedule::step() {
  XGRAD_CHECK(applied_, "LRSchedule", "the schedule's constructor did not call apply(): update 0 ran at the base ",
              "rate, not rate(0); end a subclass's constructor with apply(), or use LambdaLR");
  ++updates_;
  apply();
}

void LRSchedule::set_updates(std::int64_t update) {
  XGRAD_CHECK(update >= 0, "LRSchedule", "update ", update, " must be >= 0");
  updates_ = update;
  apply();
}

LambdaLR::LambdaLR(Optimizer& optimizer, std::function<double(std::int64_t)> factor)
    : LRSchedule(optimizer), factor_(std::move(factor)) {
  XGRAD_CHECK(factor_, "LambdaLR", "the factor function is empty");
  apply();
}
double LambdaLR::rate_from(double base, std::int64_t update) const { return base * factor_(update); }

ConstantLR::ConstantLR(Optimizer& optimizer) : LRSchedule(optimizer) { apply(); }
double ConstantLR::rate_from(double base, std::int64_t) const { return base; }

StepLR::StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma)
    : LRSchedule(optimizer), step_size_(step_size), gamma_(gamma) {
  XGRAD_CHECK(step_size > 0, "StepLR", "step_size ", step_size, " must be > 0");
  XGRAD_CHECK(gamma > 0.0 && std::isfinite(gamma), "StepLR", "gamma ", gamma, " must be finite and > 0");
  apply();
}

double StepLR::rate_from(double base, std::int64_t update) const {
  return base * std::pow(gamma_, static_cast<double>(update / step_size_));
}

WarmupCosineLR::WarmupCosineLR(Optimizer& optimizer, std::int64_t warmup, std::int64_t total, double min_lr)
    : LRSchedule(optimizer), warmup_(warmup), total_(total), min_lr_(min_lr) {
  XGRAD_CHECK(warmup >= 0 && total > warmup, "WarmupCosineLR", "needs 0 <= warmup < total, got warmup ", warmup,
              ", total ", total);
  for (std::size_t g = 0; g < optimizer.num_groups(); ++g)
    XGRAD_CHECK(min_lr >= 0.0 && min_lr <= base_lr(g), "WarmupCosineLR", "min_lr ", min_lr,
                " must lie in [0, base rate ", base_lr(g), "]");
  apply();
}

double WarmupCosineLR::rate_from(double base, std::int64_t update) const {
  // A base loaded after the constructor's check (a resume) is checked here.
  XGRAD_CHECK(min_lr_ <= base, "WarmupCosineLR", "min_lr ", min_lr_, " must lie in [0, base rate ", base, "]");
  if (update < warmup_) return base * static_cast<double>(update + 1) / static_cast<double>(warmup_);
  const double progress = std::min(1.0, static_cast<double>(update - warmup_) / static_cast<double>(total_ - warmup_));
  return min_lr_ + (base - min_lr_) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

// d_model is signed: a negative one would otherwise wrap to a huge size and pass.
NoamLR::NoamLR(Optimizer& optimizer, std::int64_t d_model, std::int64_t warmup, double factor)
    : LRSchedule(optimizer), d_model_(static_cast<double>(d_model)), warmup_(warmup), factor_(factor) {
  XGRAD_CHECK(d_model > 0 && warmup > 0, "NoamLR", "d_model ", d_model, " and warmup ", warmup, " must be > 0");
  XGRAD_CHECK(factor > 0.0 && std::isfinite(factor), "NoamLR", "factor ", factor, " must be finite and > 0");
  apply();
}

double NoamLR::rate_from(double base, std::int64_t update) const {
  const double s = static_cast<double>(std::max<std::int64_t>(update, 1));
  return base * factor_ * std::pow(d_model_, -0.5) *
         std::min(std::pow(s, -0.5), s * std::pow(static_cast<double>(warmup_), -1.5));
}

}  // namespace xgrad::optim
