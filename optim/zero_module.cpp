#include "zrt/optim/zero_module.h"

#include <algorithm>

#include "zrt/optim/flat_param/sharding_groups.h"

namespace zrt::optim {

ZeroModule::ZeroModule(CommPtr world, ZeroModuleOptions options)
    : world_(std::move(world)), options_(std::move(options)) {
  ZRT_CHECK_ARG(world_ != nullptr, "ZeroModule needs a world communicator");
  plan_ = std::make_unique<StrategyPlan>(
      plan_strategy(options_.strategy, world_, options_.zero3_size > 0 ? options_.zero3_size : world_->size()));
}

ZeroModule::~ZeroModule() = default;

ZeroModule::Unit ZeroModule::add_unit(const std::string& name,
                                      const std::vector<std::pair<std::string, Tensor>>& params) {
  ZRT_CHECK_STATE(!optimizer_, "ZeroModule::add_unit('", name, "'): units must be added before the first step");
  std::vector<NamedParam> named;
  for (const auto& [pname, value] : params) named.push_back({name, pname, value.to(DType::f32).clone()});
  FlatParamOptions o;
  o.name = name;
  o.param_dtype = options_.dtype;
  o.reduce_dtype = options_.reduce_dtype;
  o.grad_reduce = ReduceOp::avg;
  o.reshard_after_forward = plan_->reshard_after_forward;
  o.reshard_after_backward = plan_->reshard_after_backward;
  o.device = options_.device;
  handles_.push_back(std::make_unique<FlatParamHandle>(std::move(named), plan_->groups, o));
  synced_.push_back(0);
  unsynced_.push_back(0);
  return handles_.size() - 1;
}

FlatParamHandle& ZeroModule::handle(Unit unit) const {
  ZRT_CHECK_ARG(unit < handles_.size(), "ZeroModule: no unit ", unit, " (", handles_.size(), " units)");
  return *handles_[unit];
}

ZeroModule::Scope::Scope(ZeroModule* module, Unit unit, bool backward, bool sync)
    : module_(module), unit_(unit), handle_(&module->handle(unit)), backward_(backward), sync_(sync) {
  if (backward_) handle_->pre_backward();
  else handle_->pre_forward();
}

ZeroModule::Scope::Scope(Scope&& o) noexcept
    : module_(o.module_), unit_(o.unit_), handle_(o.handle_), backward_(o.backward_), sync_(o.sync_) {
  o.handle_ = nullptr;
}

ZeroModule::Scope::~Scope() {
  if (!handle_) return;
  try {
    if (backward_) {
      handle_->post_backward(sync_);
      if (sync_) {
        ++module_->synced_[unit_];
        module_->unsynced_[unit_] = 0;
      } else {
        ++module_->unsynced_[unit_];
      }
    } else {
      handle_->post_forward();
    }
  } catch (const std::exception& e) {
    report_in_destructor("ZeroModule scope", e);
  }
}

Tensor ZeroModule::Scope::param(const std::string& name) const {
  return handle_->param(handle_->index_of(handle_->name() + "." + name));
}

Tensor ZeroModule::Scope::grad(const std::string& name) const {
  ZRT_CHECK_STATE(backward_, "ZeroModule: grad('", name, "') of ", handle_->name(), " outside a backward scope");
  return handle_->grad(handle_->index_of(handle_->name() + "." + name));
}

ZeroModule::Scope ZeroModule::forward(Unit unit) { return Scope(this, unit, false, false); }
ZeroModule::Scope ZeroModule::backward(Unit unit, bool sync) { return Scope(this, unit, true, sync); }

// Note [ZeroModule steps on synced gradients]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A backward scope with sync=false accumulates into the unit's fp32 gradient
// and reduces nothing; only a sync reduce-scatters it into the gradient
// shard AdamW reads. A step after scopes that never synced would read zero
// (or stale) shards: grad norm 0 and an update of weight decay alone, with
// nothing said. So step() needs at least one sync since the last step, and
// no unit whose latest backward scopes only accumulated. The counts are the
// same on every rank (scopes are collective), so every rank throws alike.
optim::StepResult ZeroModule::step(double lr) {
  ZRT_CHECK_STATE(!handles_.empty(), "ZeroModule::step: no units were added");
  for (Unit u = 0; u < handles_.size(); ++u)
    ZRT_CHECK_STATE(unsynced_[u] == 0, "ZeroModule::step: unit '", handles_[u]->name(), "' has ",
                    unsynced_[u], " backward scope(s) with sync=false after its last sync; the last "
                    "micro-batch's backward must sync (backward(unit, true)) before step()");
  ZRT_CHECK_STATE(std::any_of(synced_.begin(), synced_.end(), [](int n) { return n > 0; }),
                  "ZeroModule::step: no backward scope synced gradients since the last step; "
                  "step() would apply weight decay alone");
  std::fill(synced_.begin(), synced_.end(), 0);
  if (!optimizer_) {
    std::vector<FlatParamHandle*> raw;
    for (auto& h : handles_) raw.push_back(h.get());
    optimizer_ = std::make_unique<optim::ZeroAdamW>(raw, options_.adamw);
  }
  return optimizer_->step(lr);
}

std::map<std::string, Tensor> ZeroModule::full_params() {
  std::map<std::string, Tensor> out;
  for (auto& h : handles_) {
    const auto values = h->summon_full_params();
    for (std::size_t i = 0; i < values.size(); ++i) out[h->fqn(i)] = values[i].to(Device::cpu());
  }
  return out;
}

}  // namespace zrt::optim
