// ZeroModule: the short way to train a model of one's own under ZeRO.
// Parameters are registered in wrap units (one FlatParamHandle each); a
// forward or backward scope gathers a unit's parameters and gives their
// unsharded views, the end of the scope reshards them; step() runs ZeroAdamW
// on the zero1 shards.
//
//   zrt::ZeroModule m(world, {.strategy = ShardingStrategy::full_shard});
//   auto l1 = m.add_unit("l1", {{"weight", w1}, {"bias", b1}});
//   { auto p = m.forward(l1); my_forward(p.param("weight"), p.param("bias"), ...); }
//   { auto p = m.backward(l1); my_backward(..., p.grad("weight"), p.grad("bias")); }
//   m.step(lr);
//
// Note [ZeroModule scopes]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// forward(u) is pre_forward ... post_forward, backward(u) is pre_backward ...
// post_backward(sync) of unit u's handle (Note [One step of the engine] is
// the same walk, scheduled by the engine). Gradients are accumulated into
// the views grad(name) hands out (zeroed at the start of each backward
// scope); with several micro-batches, pass sync = false for all but the last
// backward of the step, so communication happens once. Gradients are
// averaged over the ranks (each rank's loss is a mean over its own rows).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "zrt/optim/zero_adamw.h"
#include "zrt/runtime/comm/communicator.h"
#include "zrt/optim/flat_param/flat_param_handle.h"
#include "zrt/optim/flat_param/sharding_strategy.h"

namespace zrt::optim {
struct StrategyPlan;
}

namespace zrt::optim {

struct ZeroModuleOptions {
  ShardingStrategy strategy = ShardingStrategy::full_shard;
  int zero3_size = 0;                // hybrid / layer-zero group size (0: the world)
  DType dtype = DType::f32;          // compute dtype of the gathered parameters
  DType reduce_dtype = DType::f32;   // gradient reduce-scatter dtype
  Device device = Device::cpu();
  optim::AdamWOptions adamw;
};

class ZeroModule {
 public:
  using Unit = std::size_t;

  // Collective over `world` (it may split it into groups).
  ZeroModule(CommPtr world, ZeroModuleOptions options = {});
  ~ZeroModule();

  // Collective: a wrap unit of named parameters with their initial values
  // (equal on every rank; any dtype, cpu). Units must be added before the
  // first step, in the same order on every rank.
  Unit add_unit(const std::string& name, const std::vector<std::pair<std::string, Tensor>>& params);

  // A unit's parameters gathered for the scope's lifetime (Note [ZeroModule scopes]).
  class Scope {
   public:
    Scope(Scope&&) noexcept;
    ~Scope();
    Tensor param(const std::string& name) const;  // compute dtype, original shape
    Tensor grad(const std::string& name) const;   // backward scopes only: accumulate here

   private:
    friend class ZeroModule;
    Scope(ZeroModule* module, Unit unit, bool backward, bool sync);
    ZeroModule* module_;
    Unit unit_;
    FlatParamHandle* handle_;
    bool backward_, sync_;
  };
  Scope forward(Unit unit);
  Scope backward(Unit unit, bool sync = true);

  // Collective: one AdamW step at `lr` on every unit's zero1 shard, from the
  // gradients the backward scopes synced since the last step (Note
  // [ZeroModule steps on synced gradients]). InvalidState when no unit
  // synced, or a unit holds gradients of backward(unit, sync=false) scopes
  // that no later sync reduced: the step would apply weight decay alone.
  optim::StepResult step(double lr);
  // Collective: every parameter, fp32, by "unit.name".
  std::map<std::string, Tensor> full_params();

  FlatParamHandle& handle(Unit unit) const;
  const CommPtr& world() const { return world_; }

 private:
  CommPtr world_;
  ZeroModuleOptions options_;
  std::unique_ptr<StrategyPlan> plan_;
  std::vector<std::unique_ptr<FlatParamHandle>> handles_;
  std::unique_ptr<optim::ZeroAdamW> optimizer_;  // built at the first step
  // Per unit since the last step: backward scopes that synced, and those that
  // only accumulated after the unit's last sync.
  std::vector<int> synced_, unsynced_;
};

}  // namespace zrt::optim
