#include "zrt/optim/zero_module.h"

#include <algorithm>
#include <cstdlib>

#include "zrt/kernels/cpu_parallel.h"
#include "zrt/optim/flat_param/sharding_groups.h"
#include "zrt/runtime/memory/caching_allocator.h"

namespace zrt::optim {

namespace {

bool is_compute_float(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

}  // namespace

ZeroModule::ZeroModule(CommPtr world, ZeroModuleOptions options)
    : world_(std::move(world)), options_(std::move(options)) {
  ZRT_CHECK_ARG(world_ != nullptr, "ZeroModule needs a world communicator");
  ZRT_CHECK_ARG(is_compute_float(options_.dtype), "ZeroModule: compute dtype must be f32, bf16 or f16, not ",
                dtype_name(options_.dtype));
  ZRT_CHECK_ARG(is_compute_float(options_.reduce_dtype),
                "ZeroModule: gradient reduce dtype must be f32, bf16 or f16, not ", dtype_name(options_.reduce_dtype));
  ZRT_CHECK_ARG(options_.grad_reduce == ReduceOp::avg || options_.grad_reduce == ReduceOp::sum,
                "ZeroModule: gradients combine by avg or sum");
  ZRT_CHECK_ARG(options_.zero3_size >= 0, "ZeroModule: zero3 size must not be negative (got ",
                options_.zero3_size, ")");
  ZRT_CHECK_ARG(!options_.dry_run || options_.device.is_cpu(), "ZeroModule: a dry run runs on cpu, not ",
                options_.device.str());
  set_current_device(options_.device);
  allocator_ = options_.allocator          ? options_.allocator
               : options_.dry_run          ? make_unbacked_caching_allocator()
                                           : make_caching_allocator(options_.device);
  ZRT_CHECK_ARG(allocator_->device() == options_.device, "ZeroModule: the allocator is for ",
                allocator_->device().str(), ", not ", options_.device.str());
  if (options_.dry_run) dry_host_memory_ = make_unbacked_caching_allocator();
  if (options_.tracer) world_->set_tracer(options_.tracer);  // before the groups are split from it
  // A CPU stream's kernels use as many threads as this rank's (Note [Kernel threads per rank]).
  auto thread_init = [threads = kernels::cpu_threads()] { kernels::set_cpu_threads(threads); };
  const bool cuda = options_.device.is_cuda();
  if (!options_.cpu_streams) options_.cpu_streams = default_cpu_streams();
  auto owned_stream = [&] {
    return options_.dry_run ? std::make_unique<OwnedStream>(OwnedStream::discarding())
                            : std::make_unique<OwnedStream>(options_.device, thread_init);
  };
  // A dry run drops compute too, so its compute stream is always one of its own.
  if (cuda || *options_.cpu_streams == CpuStreams::all || options_.dry_run) compute_stream_ = owned_stream();
  if (cuda || *options_.cpu_streams != CpuStreams::none) comm_stream_ = owned_stream();
  plan_ = std::make_unique<StrategyPlan>(
      plan_strategy(options_.strategy, world_, options_.zero3_size > 0 ? options_.zero3_size : world_->size()));
  if (options_.dtype == DType::f16)
    scaler_ = std::make_unique<DynamicLossScaler>(loss_scaler_options_for(options_.dtype));
}

ZeroModule::~ZeroModule() {
  try {
    synchronize();  // queued work still reads the memory the members below free
  } catch (const std::exception& e) {
    report_in_destructor("ZeroModule", e);
  }
}

void ZeroModule::synchronize() const {
  if (comm_stream_) comm_stream_->get().synchronize();
  if (compute_stream_) compute_stream_->get().synchronize();
}

const char* cpu_streams_name(CpuStreams s) {
  switch (s) {
    case CpuStreams::none: return "none";
    case CpuStreams::comm: return "comm";
    case CpuStreams::all: return "all";
  }
  return "?";
}

CpuStreams default_cpu_streams() {
  const char* env = std::getenv("ZRT_CPU_STREAMS");
  if (env == nullptr || *env == '\0') return CpuStreams::comm;
  try {
    return parse_cpu_streams(env);
  } catch (const InvalidArgument&) {
    ZRT_THROW(InvalidArgument, "ZRT_CPU_STREAMS='", env, "' is not one of none, comm, all");
  }
}

CpuStreams parse_cpu_streams(const std::string& s) {
  for (CpuStreams c : {CpuStreams::none, CpuStreams::comm, CpuStreams::all})
    if (s == cpu_streams_name(c)) return c;
  ZRT_THROW(InvalidArgument, "CPU streams '", s, "' is not one of none, comm, all");
}

ZeroModule::Unit ZeroModule::add_unit(const std::string& name,
                                      const std::vector<std::pair<std::string, Tensor>>& params) {
  std::vector<NamedParam> named;
  for (const auto& [pname, value] : params) named.push_back({name, pname, value});
  return add_unit(name, named);
}

ZeroModule::Unit ZeroModule::add_unit(const std::string& name, const std::vector<NamedParam>& params) {
  ZRT_CHECK_STATE(!optimizer_, "ZeroModule::add_unit('", name, "'): units must be added before the first step");
  // A tensor of an earlier unit here would be a tie across units, which the
  // copies below would silently untie (two masters, two gradients): refused.
  for (const auto& p : params) {
    const std::size_t begin = static_cast<std::size_t>(p.tensor.offset()) * p.tensor.itemsize();
    const std::size_t end = begin + p.tensor.nbytes();
    for (const SeenParam& seen : seen_params_) {
      const auto storage = seen.storage.lock();
      if (!storage || storage != p.tensor.storage_ptr() || end <= seen.begin || seen.end <= begin) continue;
      ZRT_THROW(InvalidArgument, "ZeroModule::add_unit('", name, "'): parameter '", p.fqn(),
                "' shares its memory with parameter '", seen.fqn, "' of unit '", seen.unit,
                "': parameters tied across wrap units are not supported; put the modules that share it in one "
                "unit (a unit may hold the same tensor under several names)");
    }
  }
  for (const auto& p : params)
    if (p.tensor.numel() > 0)
      seen_params_.push_back({p.tensor.storage_ptr(), static_cast<std::size_t>(p.tensor.offset()) * p.tensor.itemsize(),
                              static_cast<std::size_t>(p.tensor.offset()) * p.tensor.itemsize() + p.tensor.nbytes(),
                              p.fqn(), name});
  // Fresh fp32 copies: a handle claims its parameters' memory, and several
  // ranks of one process may share the initial values. One copy per distinct
  // tensor, so names tied to one tensor stay one parameter.
  std::vector<std::pair<const Tensor*, Tensor>> copies;  // source, its copy
  std::vector<NamedParam> owned;
  for (const auto& p : params) {
    auto same = std::find_if(copies.begin(), copies.end(), [&](const auto& c) {
      return c.first->shares_storage(p.tensor) && c.first->offset() == p.tensor.offset() &&
             c.first->shape() == p.tensor.shape();
    });
    if (same == copies.end()) {
      // A dry run reads no value: an unbacked stand-in of the copy (Note [Dry runs]).
      Tensor copy = options_.dry_run ? Tensor::empty(p.tensor.shape(), DType::f32, Device::cpu(), dry_host_allocator())
                                     : p.tensor.to(DType::f32);
      same = copies.insert(copies.end(), {&p.tensor, copy});
    }
    owned.push_back({p.module_path, p.name, same->second});
  }
  FlatParamOptions o;
  o.name = name;
  o.param_dtype = options_.dtype;
  o.reduce_dtype = options_.reduce_dtype;
  o.grad_reduce = options_.grad_reduce;
  o.reshard_after_forward = plan_->reshard_after_forward;
  o.reshard_after_backward = plan_->reshard_after_backward;
  o.offload_grads = options_.offload_grads;
  o.device = options_.device;
  o.allocator = allocator_;
  if (options_.dry_run) o.host_allocator = dry_host_allocator();
  o.stream = stream();
  o.comm_stream = comm_stream();
  handles_.push_back(std::make_unique<FlatParamHandle>(std::move(owned), plan_->groups, o));
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
    close();
  } catch (const std::exception& e) {
    report_in_destructor("ZeroModule scope", e);
  }
}

void ZeroModule::Scope::close() {
  if (!handle_) return;
  FlatParamHandle* h = handle_;
  handle_ = nullptr;  // closed, whatever happens below
  if (!backward_) {
    h->post_forward();
    return;
  }
  h->post_backward(sync_);
  if (sync_) {
    module_->synced_since_step_ = true;
    module_->unsynced_[unit_] = 0;
  } else {
    ++module_->unsynced_[unit_];
  }
}

namespace {

// "weight" in unit "fc1" is "fc1.weight"; a full name works too.
std::size_t scope_param_index(const FlatParamHandle* h, const std::string& name) {
  ZRT_CHECK_STATE(h != nullptr, "ZeroModule: parameter '", name, "' of a closed scope");
  auto i = h->find(h->name() + "." + name);
  if (!i) i = h->find(name);
  ZRT_CHECK_ARG(i.has_value(), "ZeroModule: unit '", h->name(), "' has no parameter '", name, "' (nor '",
                h->name(), ".", name, "')");
  return *i;
}

}  // namespace

Tensor ZeroModule::Scope::param(const std::string& name) const {
  const std::size_t i = scope_param_index(handle_, name);
  return handle_->param(i);
}

Tensor ZeroModule::Scope::grad(const std::string& name) const {
  ZRT_CHECK_STATE(backward_, "ZeroModule: grad('", name, "') outside a backward scope");
  const std::size_t i = scope_param_index(handle_, name);
  return handle_->grad(i);
}

ZeroModule::Scope ZeroModule::forward(Unit unit) { return Scope(this, unit, false, false); }
ZeroModule::Scope ZeroModule::backward(Unit unit, bool sync) { return Scope(this, unit, true, sync); }
void ZeroModule::prefetch(Unit unit) { handle(unit).unshard(); }

void ZeroModule::wait_for_reduced_grads() {
  for (auto& h : handles_) h->wait_for_reduced_grads();
}

ZeroAdamW& ZeroModule::optimizer() {
  if (!optimizer_) {
    ZRT_CHECK_STATE(!handles_.empty(), "ZeroModule: no units were added");
    std::vector<FlatParamHandle*> raw;
    for (auto& h : handles_) raw.push_back(h.get());
    optimizer_ = std::make_unique<ZeroAdamW>(raw, options_.adamw, options_.offload_optimizer);
  }
  return *optimizer_;
}

// Note [ZeroModule steps on synced gradients]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A backward scope with sync=false accumulates into the unit's fp32 gradient
// and reduces nothing; only a sync reduce-scatters it into the gradient
// shard AdamW reads. A step after scopes that never synced would read zero
// (or stale) shards: grad norm 0 and an update of weight decay alone, with
// nothing said. So step() needs at least one sync since the last step, and
// no unit whose latest backward scopes only accumulated. The counts are the
// same on every rank (scopes are collective), so every rank throws alike.
StepResult ZeroModule::step(double lr) {
  ZRT_CHECK_STATE(!handles_.empty(), "ZeroModule::step: no units were added");
  for (Unit u = 0; u < handles_.size(); ++u)
    ZRT_CHECK_STATE(unsynced_[u] == 0, "ZeroModule::step: unit '", handles_[u]->name(), "' has ",
                    unsynced_[u], " backward scope(s) with sync=false after its last sync; the last "
                    "micro-batch's backward must sync (backward(unit, true)) before step()");
  ZRT_CHECK_STATE(synced_since_step_, "ZeroModule::step: no backward scope synced gradients since the last step; "
                  "step() would apply weight decay alone");
  synced_since_step_ = false;
  wait_for_reduced_grads();
  return optimizer().step(lr, scaler_.get());
}

std::map<std::string, Tensor> ZeroModule::full_params() {
  std::map<std::string, Tensor> out;
  for (auto& h : handles_) {
    const auto values = h->summon_full_params();
    for (std::size_t i = 0; i < values.size(); ++i) out[h->fqn(i)] = values[i].to(Device::cpu());
  }
  return out;
}

std::optional<ZeroModule::ParamLocation> ZeroModule::find_param(const std::string& name) const {
  for (Unit u = 0; u < handles_.size(); ++u)
    if (const auto i = handles_[u]->find(name)) return ParamLocation{u, *i};
  return std::nullopt;
}

Tensor ZeroModule::full_param(const std::string& name) {
  const auto at = find_param(name);
  ZRT_CHECK_ARG(at.has_value(), "ZeroModule: no unit has a parameter named '", name,
                "' (names are full_params()'s: \"unit.name\" or the module path's)");
  return handles_[at->unit]->summon_full_params()[at->index].to(Device::cpu());
}

}  // namespace zrt::optim
