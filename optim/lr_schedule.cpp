#include "zrt/optim/lr_schedule.h"

#include <cmath>
#include <numbers>

#include "zrt/runtime/error.h"

namespace zrt::optim {

namespace {

void check_lr(const char* what, double lr) {
  ZRT_CHECK_ARG(std::isfinite(lr) && lr >= 0, what, " must be finite and >= 0 (got ", lr, ")");
}

void check_step(std::int64_t step) {
  ZRT_CHECK_ARG(step >= 0, "lr schedule: step must be >= 0 (got ", step, ")");
}

}  // namespace

ConstantLr::ConstantLr(double lr) : lr_(lr) { check_lr("ConstantLr: lr", lr); }

double ConstantLr::lr(std::int64_t step) const {
  check_step(step);
  return lr_;
}

WarmupCosineLr::WarmupCosineLr(WarmupCosineOptions options) : o_(options) {
  check_lr("WarmupCosineLr: max_lr", o_.max_lr);
  check_lr("WarmupCosineLr: min_lr", o_.min_lr);
  ZRT_CHECK_ARG(o_.min_lr <= o_.max_lr, "WarmupCosineLr: min_lr ", o_.min_lr, " exceeds max_lr ",
                o_.max_lr);
  ZRT_CHECK_ARG(o_.warmup_steps >= 0 && o_.total_steps >= o_.warmup_steps,
                "WarmupCosineLr: need 0 <= warmup_steps (", o_.warmup_steps, ") <= total_steps (",
                o_.total_steps, ")");
}

double WarmupCosineLr::lr(std::int64_t step) const {
  check_step(step);
  const auto s = static_cast<double>(step);
  const auto w = static_cast<double>(o_.warmup_steps);
  const auto t = static_cast<double>(o_.total_steps);
  if (step < o_.warmup_steps) return o_.max_lr * (s + 1) / w;
  if (step >= o_.total_steps) return o_.min_lr;
  const double progress = (s - w) / (t - w);
  return o_.min_lr + 0.5 * (1 + std::cos(std::numbers::pi * progress)) * (o_.max_lr - o_.min_lr);
}

}  // namespace zrt::optim
