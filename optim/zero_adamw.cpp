#include "zrt/optim/zero_adamw.h"

#include <algorithm>
#include <cmath>

#include <xxhash.h>

#include "zrt/kernels/ops/fill.h"
#include "zrt/kernels/ops/random_fill.h"
#include "zrt/optim/grad_stats.h"
#include "zrt/runtime/comm/comm_watchdog.h"

namespace zrt::optim {

namespace {

// `dtype`, shaped like the zero1 shard, where it lives (its device and
// allocator, or host memory, Note [Master in host memory]); zeroed as torch
// initialises exp_avg / exp_avg_sq.
Tensor zeroed_state_like(const FlatParamHandle& h, DType dtype) {
  const FlatParamOptions& o = h.options();
  const bool host = o.master_on_host;
  Tensor t = Tensor::empty({h.zero1_shard().numel()}, dtype, host ? Device::cpu() : o.device,
                           host ? o.host_allocator : o.allocator, o.stream);
  kernels::zero(t, h.master_stream());
  return t;
}

kernels::AdamWHyperparams hyperparams(const AdamWOptions& o, double lr) {
  return {
      .lr = lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps, .weight_decay = o.weight_decay};
}

// Where handle h's shard starts in its flat parameter, and the unit's stream:
// a key independent of the sharding (Note [bf16 AdamW moments]).
kernels::AdamWRounding rounding_of(const FlatParamHandle& h, std::uint64_t seed) {
  return {.seed = seed,
          .stream = kernels::random_stream_of(h.name()),
          .first_index = h.groups().zero1->rank() * h.zero1_shard().numel()};
}

}  // namespace

void check_adamw_options(const AdamWOptions& o) {
  kernels::check_adamw_hyperparams(hyperparams(o, 0.0));
  ZRT_CHECK_ARG(std::isfinite(o.max_grad_norm) && o.max_grad_norm >= 0,
                "AdamW max_grad_norm must be finite and >= 0 (got ", o.max_grad_norm, ")");
  ZRT_CHECK_ARG(o.max_consecutive_skips >= 0, "AdamW max_consecutive_skips must be >= 0 (got ",
                o.max_consecutive_skips, ")");
  ZRT_CHECK_ARG(static_cast<bool>(o.decays), "AdamW: empty decay policy");
  ZRT_CHECK_ARG(o.state_dtype == DType::f32 || o.state_dtype == DType::bf16,
                "AdamW state dtype must be f32 or bf16 (got ", dtype_name(o.state_dtype), ")");
}

ZeroAdamW::ZeroAdamW(std::vector<FlatParamHandle*> handles, AdamWOptions options,
                     OptimizerOffload offload)
    : options_(std::move(options)), offload_(std::move(offload)), raw_handles_(std::move(handles)) {
  check_adamw_options(options_);
  ZRT_CHECK_ARG(!raw_handles_.empty(), "ZeroAdamW: no handles");
  for (std::size_t k = 0; k < raw_handles_.size(); ++k) {
    FlatParamHandle* h = raw_handles_[k];
    ZRT_CHECK_ARG(h != nullptr, "ZeroAdamW: handle ", k, " is null");
    ZRT_CHECK_ARG(std::count(raw_handles_.begin(), raw_handles_.end(), h) == 1,
                  "ZeroAdamW: handle ", h->name(), " is passed twice");
    // One agreement collective serves every handle only if they share groups.
    const ZeroGroups& g0 = raw_handles_.front()->groups();
    ZRT_CHECK_ARG(h->groups().zero1 == g0.zero1 && h->groups().replica == g0.replica,
                  "ZeroAdamW: handle ", h->name(), " has other zero1/replica groups than ",
                  raw_handles_.front()->name());
    ZRT_CHECK_ARG(h->options().device == raw_handles_.front()->options().device,
                  "ZeroAdamW: handle ", h->name(), " is on ", h->options().device.str(), ", ",
                  raw_handles_.front()->name(), " on ",
                  raw_handles_.front()->options().device.str());
    const bool on_disk = offload_.kind == OptimizerOffload::Kind::disk;
    const DType dtype = options_.state_dtype;
    handles_.push_back({h, on_disk ? Tensor() : zeroed_state_like(*h, dtype),
                        on_disk ? Tensor() : zeroed_state_like(*h, dtype),
                        shard_decay_ranges(*h, options_.decays),
                        rounding_of(*h, options_.rounding_seed)});
  }
  // The policy is code, not a value: its choice over every parameter is
  // what the ranks must agree on.
  std::vector<std::uint8_t> decayed;
  for (const FlatParamHandle* h : raw_handles_)
    for (const ParamSpec& p : h->layout().params())
      decayed.push_back(options_.decays(p.fqn, p.shape) ? 1 : 0);
  decay_digest_ = XXH64(decayed.data(), decayed.size(), 0);
  for (const FlatParamHandle* h : raw_handles_)
    ZRT_CHECK_ARG(
        h->options().master_on_host == (offload_.kind == OptimizerOffload::Kind::host),
        "ZeroAdamW: ", "optimizer offload ", offload_.str(), " needs handles whose master is ",
        offload_.kind == OptimizerOffload::Kind::host ? "" : "not ", "in host memory; ", h->name(),
        "'s is ", h->options().master_on_host ? "" : "not ", "(FlatParamOptions::master_on_host)");
  if (offload_.kind == OptimizerOffload::Kind::disk) {
    // One stream orders every handle's update before its chunk is written back.
    for (const FlatParamHandle* h : raw_handles_)
      ZRT_CHECK_ARG(h->options().stream == raw_handles_.front()->options().stream,
                    "ZeroAdamW: optimizer offload to ", "disk needs every handle on one stream; ",
                    h->name(), " is on another than ", raw_handles_.front()->name());
    std::vector<std::int64_t> sizes;
    for (const FlatParamHandle* h : raw_handles_) sizes.push_back(h->zero1_shard().numel());
    const FlatParamOptions& o = raw_handles_.front()->options();
    moments_ = std::make_unique<OffloadedMoments>(
        offload_.dir, raw_handles_.front()->groups().zero1->rank(), std::move(sizes),
        offload_.chunk_elements, options_.state_dtype, o.device, o.allocator, o.host_allocator,
        o.stream);
  }
}

void ZeroAdamW::step_offloaded(const kernels::AdamWHyperparams& hp,
                               const kernels::AdamWStepOptions& step_options,
                               const std::function<void(std::size_t)>& updated) {
  auto update = [&](const OffloadedMoments::Chunk& c) {
    const ShardState& s = handles_[c.handle];
    // The decay ranges that fall in the chunk, in its coordinates.
    std::vector<kernels::ElementRange> decay;
    for (const kernels::ElementRange& r : s.decay_ranges) {
      const std::int64_t b = std::max(r.begin, c.begin), e = std::min(r.end, c.begin + c.count);
      if (b < e) decay.push_back({b - c.begin, e - c.begin});
    }
    FlatParamHandle& h = *s.handle;
    kernels::AdamWStepOptions chunk_options = step_options;
    chunk_options.rounding = s.rounding;
    chunk_options.rounding.first_index += c.begin;
    kernels::fused_adamw(h.zero1_shard().slice(c.begin, c.count), c.exp_avg, c.exp_avg_sq,
                         h.master_grad().slice(c.begin, c.count), step_ + 1, hp, decay,
                         chunk_options, h.options().stream);
  };
  moments_->update_all(update, updated);
}

StepResult ZeroAdamW::step(double lr, DynamicLossScaler* scaler,
                           const std::function<void()>& before_update,
                           const std::function<void(std::size_t)>& after_update) {
  ZRT_CHECK_CALL(!stepping_,
                 "ZeroAdamW::step: called while a step of this optimizer runs (from its "
                 "before_update or after_update); a step inside a step would update twice "
                 "from one gradient");
  const SteppingFlag stepping(stepping_);
  // lr is checked by fused_adamw before it writes anything; a skipped step
  // reads no lr.
  for (const ShardState& s : handles_)
    ZRT_CHECK_CALL(s.handle->state() == HandleState::idle, "ZeroAdamW::step: unit '",
                   s.handle->name(), "' has a scope open; close every scope first");

  // The reductions in flight on a communication stream write the gradients
  // read below (a caller may step the optimizer without ZeroModule::step).
  for (const ShardState& s : handles_) s.handle->wait_for_reduced_grads();
  const double inv_loss_scale = scaler ? scaler->inv_scale() : 1.0;
  const GradStats stats = global_grad_stats(raw_handles_, settings_digest(lr, inv_loss_scale));
  ZRT_CHECK_ARG(stats.settings_agree,
                "ZeroAdamW::step: the ranks step with different settings (lr ", lr,
                " here; or AdamWOptions, its decay policy included, the loss scale or the "
                "optimizer step count ",
                step_,
                " differ between ranks): each rank would update its shard with its own, "
                "training a model no one setting describes");
  // Note [Ranks agree on each step's settings] in grad_stats.cpp.
  // The lr of a step that will update, refused before anything moves (the
  // scaler, the counters); a skipped step reads none.
  if (!stats.non_finite) kernels::check_adamw_hyperparams(hyperparams(options_, lr));
  if (before_update) before_update();
  if (scaler) scaler->update(stats.non_finite);
  StepResult r;
  r.lr = lr;
  r.loss_scale = 1.0 / inv_loss_scale;
  r.grad_norm = std::sqrt(stats.squared_norm) * inv_loss_scale;
  if (stats.non_finite) {
    r.skipped = true;
    r.skipped_total = ++skipped_total_;
    r.consecutive_skips = ++consecutive_skips_;
    r.step = step_;
    // The step's result goes with the error: its caller reports the step.
    if (options_.max_consecutive_skips > 0 && consecutive_skips_ >= options_.max_consecutive_skips)
      throw TooManySkippedStepsWith<StepResult>(
          TooManySkippedSteps(detail::concat(
              consecutive_skips_,
              " optimizer steps in a row were skipped for non-finite gradients (limit ",
              options_.max_consecutive_skips, "; ", skipped_total_, " skipped in total",
              r.loss_scale == 1.0 ? std::string()
                                  : detail::concat("; the last at loss scale ", r.loss_scale),
              ")")),
          r);
    return r;
  }
  consecutive_skips_ = 0;
  r.skipped_total = skipped_total_;
  r.clip_coef =
      options_.max_grad_norm > 0 ? clip_coefficient(r.grad_norm, options_.max_grad_norm) : 1.0;
  r.step = step_ + 1;

  const kernels::AdamWHyperparams hp = hyperparams(options_, lr);
  kernels::AdamWStepOptions step_options;
  step_options.grad_scale = inv_loss_scale * r.clip_coef;
  // Handle k is updated: marked, and handed to the caller before the next
  // handle's update (Note [Gathers after the update] in zero_module.cpp).
  auto hand_over = [&](std::size_t k) {
    handles_[k].handle->mark_params_updated();
    if (after_update) after_update(k);
  };
  // On disk each handle is handed over once its last chunk is updated, while
  // the next handles' chunks stream (Note [Optimizer state on disk]).
  if (moments_)
    step_offloaded(hp, step_options, hand_over);
  else
    for (std::size_t k = 0; k < handles_.size(); ++k) {
      ShardState& s = handles_[k];
      FlatParamHandle& h = *s.handle;
      if (h.master_stream() != h.options().stream) {
        // Note [Master in host memory]: the host updates the master once the
        // gradient's copy down has landed (the statistics' read above waited
        // for the handles' first stream only).
        h.wait_for_reduced_grads();
        const ZeroGroups& g = h.groups();
        CommWatchdog({g.zero1, g.zero3, g.replica})
            .synchronize(h.options().stream, "copying the gradient shard to host memory");
      }
      step_options.rounding = s.rounding;
      kernels::fused_adamw(h.zero1_shard(), s.exp_avg, s.exp_avg_sq, h.master_grad(), r.step, hp,
                           s.decay_ranges, step_options, h.master_stream());
      hand_over(k);
    }
  step_ = r.step;
  return r;
}

std::uint64_t ZeroAdamW::settings_digest(double lr, double inv_loss_scale) const {
  const AdamWOptions& o = options_;
  const double numbers[] = {lr,
                            inv_loss_scale,
                            o.beta1,
                            o.beta2,
                            o.eps,
                            o.weight_decay,
                            o.max_grad_norm,
                            static_cast<double>(o.max_consecutive_skips),
                            static_cast<double>(o.state_dtype),
                            static_cast<double>(step_),
                            static_cast<double>(skipped_total_)};
  return XXH64(numbers, sizeof numbers,
               XXH64(&decay_digest_, sizeof decay_digest_, o.rounding_seed));
}

const ZeroAdamW::ShardState& ZeroAdamW::at(std::size_t k) const {
  ZRT_CHECK_ARG(k < handles_.size(), "ZeroAdamW: handle index ", k, " out of range (",
                handles_.size(), " handles)");
  return handles_[k];
}

FlatParamHandle& ZeroAdamW::handle(std::size_t k) const { return *at(k).handle; }

std::span<const kernels::ElementRange> ZeroAdamW::decay_ranges(std::size_t k) const {
  return at(k).decay_ranges;
}

void ZeroAdamW::load_counters(std::int64_t step, std::int64_t skipped_total,
                              std::int64_t consecutive_skips) {
  ZRT_CHECK_CALL(!stepping_,
                 "ZeroAdamW::load_counters: called while a step of this optimizer runs; the step "
                 "would go on from what was loaded");
  ZRT_CHECK_ARG(step >= 0 && skipped_total >= 0 && consecutive_skips >= 0 &&
                    consecutive_skips <= skipped_total,
                "ZeroAdamW::load_counters: bad counters (step ", step, ", skipped ", skipped_total,
                ", in a row ", consecutive_skips, ")");
  step_ = step;
  skipped_total_ = skipped_total;
  consecutive_skips_ = consecutive_skips;
}

Tensor ZeroAdamW::exp_avg_shard(std::size_t k) const {
  return moments_ ? moments_->read(k, 0) : at(k).exp_avg;
}
Tensor ZeroAdamW::exp_avg_sq_shard(std::size_t k) const {
  return moments_ ? moments_->read(k, 1) : at(k).exp_avg_sq;
}

void ZeroAdamW::load_moments(std::size_t k, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                             Stream stream) {
  ZRT_CHECK_CALL(!stepping_,
                 "ZeroAdamW::load_moments: called while a step of this optimizer runs; the step "
                 "would go on from what was loaded");
  const ShardState& s = at(k);
  if (moments_) {
    moments_->write(k, exp_avg, exp_avg_sq);
    return;
  }
  Tensor(s.exp_avg).copy_(exp_avg, stream);
  Tensor(s.exp_avg_sq).copy_(exp_avg_sq, stream);
}

Tensor ZeroAdamW::param_slice(const Tensor& shard, std::size_t k, std::size_t i,
                              const char* suffix) const {
  const FlatParamHandle& h = *at(k).handle;
  ZRT_CHECK_ARG(i < h.num_params(), "ZeroAdamW: parameter index ", i, " out of range for handle ",
                h.name(), " (", h.num_params(), " parameters)");
  const ShardParamInfo& info = h.zero1_shard_infos()[i];
  return shard.slice(info.offset_in_shard, info.numel_in_shard).set_name(h.fqn(i) + suffix);
}

Tensor ZeroAdamW::exp_avg(std::size_t k, std::size_t i) const {
  return param_slice(exp_avg_shard(k), k, i, ".exp_avg");
}

Tensor ZeroAdamW::exp_avg_sq(std::size_t k, std::size_t i) const {
  return param_slice(exp_avg_sq_shard(k), k, i, ".exp_avg_sq");
}

}  // namespace zrt::optim
