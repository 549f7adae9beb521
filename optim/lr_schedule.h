// Learning-rate schedules: the lr for optimizer step s (0-based), passed to
// ZeroAdamW::step each step.
#pragma once

#include <cstdint>

namespace zrt::optim {

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  // The lr of step `step` (0-based; InvalidArgument if negative).
  virtual double lr(std::int64_t step) const = 0;
};

class ConstantLr final : public LrSchedule {
 public:
  explicit ConstantLr(double lr);
  double lr(std::int64_t step) const override;

 private:
  double lr_;
};

// Linear warm-up to max_lr, then half a cosine down to min_lr (nanoGPT/GPT-2
// style). With W = warmup_steps and T = total_steps, for step s:
//   s <  W:      lr = max_lr * (s + 1) / W
//   s >= T:      lr = min_lr
//   otherwise:   lr = min_lr + 0.5 * (1 + cos(pi * (s - W) / (T - W))) * (max_lr - min_lr)
// so the last warm-up step and step W both use max_lr.
struct WarmupCosineOptions {
  double max_lr = 6e-4;
  double min_lr = 6e-5;
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 1;  // >= warmup_steps
};

class WarmupCosineLr final : public LrSchedule {
 public:
  explicit WarmupCosineLr(WarmupCosineOptions options);
  double lr(std::int64_t step) const override;
  const WarmupCosineOptions& options() const { return o_; }

 private:
  WarmupCosineOptions o_;
};

}  // namespace zrt::optim
