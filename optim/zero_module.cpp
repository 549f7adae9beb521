#include "zrt/optim/zero_module.h"

#include <xxhash.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/ops/fill.h"
#include "zrt/kernels/ops/norm.h"
#include "zrt/optim/flat_param/sharding_groups.h"
#include "zrt/runtime/comm/comm_watchdog.h"
#include "zrt/runtime/comm/rank_agreement.h"
#include "zrt/runtime/memory/caching_allocator.h"

namespace zrt::optim {

namespace {

// Each rank's offload settings are its own (its disk directory may differ);
// whether they can hold the moments is agreed with the options, so that a
// rank that cannot is refused by every rank, not alone (the others would
// wait for it in the module's next collective): "usable", else why not.
std::string offload_refusal(const ZeroModuleOptions& o) {
  try {
    check_optimizer_offload(o.offload_optimizer, o.dry_run);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "usable";
}

// The loss scaler's settings in f16: the given ones, else the dtype's defaults.
LossScalerOptions loss_scaler_to_run(const ZeroModuleOptions& o) {
  return o.loss_scaler.value_or(loss_scaler_options_for(o.dtype));
}

// The options every rank's module must share (Note [Ranks agree on their
// settings]). A rank's device index, disk directory, streams, memory limit,
// allocators and tracer are its own. Read before the options are checked:
// a value out of range is compared as its name ("?") or number.
Settings options_every_rank_shares(const ZeroModuleOptions& o, int world_size,
                                   const std::string& offload_check) {
  // The zero3 group's size: zero3_size, or for 0 the strategy's own group.
  const bool fixed =
      o.strategy != ShardingStrategy::hybrid_shard && o.strategy != ShardingStrategy::layer_zero;
  const int own = o.strategy == ShardingStrategy::no_shard ? 1 : world_size;
  const int zero3_group = o.zero3_size != 0 ? o.zero3_size : fixed ? own : world_size;
  auto exact = [](double x) {  // the shortest text that reads back as x
    char text[32];
    return std::string(text, std::to_chars(text, text + sizeof text, x).ptr);
  };
  auto boolean = [](bool b) { return std::string(b ? "true" : "false"); };
  auto scaler = [&](const LossScalerOptions& s) {
    return detail::concat(boolean(s.enabled), ", init ", exact(s.init_scale), ", growth ",
                          exact(s.growth_factor), " every ", s.growth_interval, ", backoff ",
                          exact(s.backoff_factor), ", hysteresis ", s.hysteresis, ", min ",
                          exact(s.min_scale));
  };
  const std::string offload = o.offload_optimizer.str();
  const AdamWOptions& a = o.adamw;
  return {{"strategy", strategy_name(o.strategy)},
          {"zero3 group size", std::to_string(zero3_group)},
          {"dtype", dtype_name(o.dtype)},
          {"grad_reduce.dtype", reduce_dtype_name(o.grad_reduce.dtype)},
          {"grad_reduce.op", reduce_op_name(o.grad_reduce.op)},
          {"grad_reduce.offload", boolean(o.grad_reduce.offload)},
          {"gather.dtype", gather_dtype_name(o.gather.dtype)},
          {"device", o.device.is_cuda() ? "cuda" : "cpu"},
          {"adamw.beta1", exact(a.beta1)},
          {"adamw.beta2", exact(a.beta2)},
          {"adamw.eps", exact(a.eps)},
          {"adamw.weight_decay", exact(a.weight_decay)},
          {"adamw.max_grad_norm", exact(a.max_grad_norm)},
          {"adamw.max_consecutive_skips", std::to_string(a.max_consecutive_skips)},
          {"adamw.state_dtype", dtype_name(a.state_dtype)},
          {"adamw.rounding_seed", std::to_string(a.rounding_seed)},
          {"offload_optimizer", offload.substr(0, offload.find(':'))},
          {"offload_optimizer.dir", offload_check},
          {"adamw.decays", o.adamw.decays ? "set" : "empty"},
          // In f16 what the scaler runs with, unset or given; elsewhere only unset is valid.
          {"loss_scaler", o.dtype == DType::f16 ? scaler(loss_scaler_to_run(o))
                          : o.loss_scaler       ? scaler(*o.loss_scaler)
                                                : "none"},
          {"dry_run", boolean(o.dry_run)}};
}

}  // namespace

ZeroModule::ZeroModule(CommPtr world, ZeroModuleOptions options)
    : world_(std::move(world)), options_(std::move(options)) {
  ZRT_CHECK_ARG(world_ != nullptr, "ZeroModule needs a world communicator");
  // First (Note [Ranks agree on their settings]): the checks below then see
  // one set of options on every rank, and no split is made with another.
  const std::string offload_check = offload_refusal(options_);
  const auto differ = differing_settings(
      *world_, options_every_rank_shares(options_, world_->size(), offload_check));
  ZRT_CHECK_ARG(differ.empty(),
                "ZeroModule: the ranks were given different options; every rank must construct "
                "its ZeroModule with the same:",
                indented_lines(differ));
  ZRT_CHECK_ARG(is_compute_float(options_.dtype),
                "ZeroModule: compute dtype must be f32, bf16 or f16, not ",
                dtype_name(options_.dtype));
  check_grad_reduce_options(options_.grad_reduce, "ZeroModule");
  ZRT_CHECK_ARG(options_.zero3_size >= 0, "ZeroModule: zero3 size must not be negative (got ",
                options_.zero3_size, ")");
  // An enum value cast from a number no enumerator has would be taken for another setting.
  ZRT_CHECK_ARG(std::string_view(strategy_name(options_.strategy)) != "?",
                "ZeroModule: sharding strategy code ", static_cast<int>(options_.strategy),
                " is none of full, grad-op, no-shard, hybrid, layer-zero");
  // The optimizer is made at the first step; its settings are checked now.
  check_adamw_options(options_.adamw);
  ZRT_CHECK_ARG(!options_.loss_scaler || options_.dtype == DType::f16,
                "ZeroModule: loss_scaler options with compute dtype ", dtype_name(options_.dtype),
                ", which scales no loss (f16 only)");
  if (options_.dtype == DType::f16)  // its options checked here, before any group is made
    scaler_ = std::make_unique<DynamicLossScaler>(loss_scaler_to_run(options_));
  // The offload's check as agreed above (made once: a directory changed
  // since would otherwise fail one rank alone).
  ZRT_CHECK_ARG(offload_check == "usable", "ZeroModule: ", offload_check);
  ZRT_CHECK_ARG(std::string_view(gather_dtype_name(options_.gather.dtype)) != "?",
                "ZeroModule: parameter gather dtype code ", static_cast<int>(options_.gather.dtype),
                " is none of compute, int8");
  // A group size the strategy does not read would be silently ignored
  // (a zero3_size meant for hybrid, with the strategy left at full).
  const int world_size = world_->size(), z = options_.zero3_size;
  const bool fixed_zero3 = options_.strategy != ShardingStrategy::hybrid_shard &&
                           options_.strategy != ShardingStrategy::layer_zero;
  const int fixed_size = options_.strategy == ShardingStrategy::no_shard ? 1 : world_size;
  ZRT_CHECK_ARG(!fixed_zero3 || z == 0 || z == fixed_size, "ZeroModule: zero3_size ", z,
                " with strategy ", strategy_name(options_.strategy), ", whose zero3 group is ",
                options_.strategy == ShardingStrategy::no_shard ? "each rank alone" : "the world",
                " (", fixed_size, "): give 0, or choose hybrid or layer-zero for groups of ", z);
  ZRT_CHECK_ARG(fixed_zero3 || z == 0 || world_size % z == 0, "ZeroModule: zero3_size ", z,
                " does not divide the world's ", world_size, " ranks (strategy ",
                strategy_name(options_.strategy), ")");
  ZRT_CHECK_ARG(
      !options_.cpu_streams || std::string_view(cpu_streams_name(*options_.cpu_streams)) != "?",
      "ZeroModule: CPU streams code ", static_cast<int>(*options_.cpu_streams),
      " is none of none, comm, all");
  ZRT_CHECK_ARG(!options_.dry_run || options_.device.is_cpu(),
                "ZeroModule: a dry run runs on cpu, not ", options_.device.str());
  set_current_device(options_.device);
  allocator_ = options_.allocator ? options_.allocator
               : options_.dry_run
                   ? make_unbacked_caching_allocator()
                   : make_caching_allocator(options_.device, {.memory_cap = options_.memory_limit});
  ZRT_CHECK_ARG(allocator_->device() == options_.device, "ZeroModule: the allocator is for ",
                allocator_->device().str(), ", not ", options_.device.str());
  if (const AllocatorPtr& host = options_.host_allocator) {
    ZRT_CHECK_ARG(host->device().is_cpu(), "ZeroModule: host_allocator is for ",
                  host->device().str(), ", not host memory");
    // Offloaded state and the gradient statistics are copied asynchronously.
    ZRT_CHECK_ARG(!options_.device.is_cuda() || options_.dry_run || host->page_locked(),
                  "ZeroModule: beside a CUDA device host_allocator must be pinned (page-locked)");
  }
  if (options_.dry_run)
    dry_host_memory_ =
        options_.host_allocator ? options_.host_allocator : make_unbacked_caching_allocator();
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
  if (cuda || *options_.cpu_streams == CpuStreams::all || options_.dry_run)
    compute_stream_ = owned_stream();
  if (cuda || *options_.cpu_streams != CpuStreams::none) comm_stream_ = owned_stream();
  plan_ = std::make_unique<StrategyPlan>(plan_strategy(
      options_.strategy, world_, options_.zero3_size > 0 ? options_.zero3_size : world_->size()));
}

// Note [A scope outlives no module]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A scope closes against its module (reshard, reduce): a module destroyed
// while one is open would leave it pointing at freed memory, as a class
// that declares its open scope before its module does on destruction. The
// module reports a unit whose scope is open as it goes, and a scope
// watches the module's lifetime: closed or destroyed after it, it touches
// nothing (close() throws InvalidState saying so, the destructor reports it).
// A tensor the caller kept from a scope or param_views shares the memory of
// its unit's unsharded parameter or gradient; released after the module, it
// would return that memory through streams the module owned. The handles
// free both as they are destroyed, and the module its tie gradients (after
// its streams are synchronized and before they go): a kept view then has no
// memory, its reads are refused, and letting it go touches nothing.
ZeroModule::~ZeroModule() {
  try {
    expect_scopes_closed("~ZeroModule");
  } catch (const std::exception& e) {
    report_in_destructor("ZeroModule", e);
  }
  try {
    synchronize();  // queued work still reads the memory the members below free
  } catch (const std::exception& e) {
    report_in_destructor("ZeroModule", e);
  }
  // Views of param_views kept past the module read freed storage: their
  // message says whose (the caller's thread alone holds them by now).
  auto destroyed = [](const std::string& unit) {
    return "belongs to a ZeroModule that was destroyed (unit '" + unit +
           "'): bind the layer to the param_views of the module it runs in";
  };
  try {
    for (const auto& h : handles_) {
      h->param(0).storage().set_freed_note(destroyed(h->name()));
      h->grad(0).storage().set_freed_note(destroyed(h->name()));
    }
    for (const Tie& tie : ties_)
      tie.grad.storage().set_freed_note(destroyed(handles_[tie.param.user.index()]->name()));
  } catch (const std::exception& e) {
    report_in_destructor("ZeroModule", e);
  }
  for (const Tie& tie : ties_) free_storage(tie.grad);  // a view of one may be kept too
}

void ZeroModule::synchronize() const {
  if (comm_stream_)
    synchronize(comm_stream_->get(), "synchronizing the module's communication stream");
  if (compute_stream_)
    synchronize(compute_stream_->get(), "synchronizing the module's compute stream");
}

CommWatchdog ZeroModule::watchdog() const {
  // A module under construction may have no plan yet; world_ is always there.
  std::vector<CommPtr> groups{world_};
  if (plan_)
    groups.insert(groups.end(), {plan_->groups.zero1, plan_->groups.zero3, plan_->groups.replica});
  return CommWatchdog(groups);
}

void ZeroModule::synchronize(Stream stream, const char* what) const {
  watchdog().synchronize(stream, what);
}

void ZeroModule::wait(const Event& event, const char* what) const { watchdog().wait(event, what); }

const char* cpu_streams_name(CpuStreams s) {
  switch (s) {
    case CpuStreams::none:
      return "none";
    case CpuStreams::comm:
      return "comm";
    case CpuStreams::all:
      return "all";
  }
  return "?";
}

std::optional<CpuStreams> env_cpu_streams() {
  const char* env = std::getenv("ZRT_CPU_STREAMS");
  if (env == nullptr || *env == '\0') return std::nullopt;
  try {
    return parse_cpu_streams(env);
  } catch (const InvalidArgument&) {
    ZRT_THROW(InvalidArgument, "ZRT_CPU_STREAMS='", env, "' is not one of none, comm, all");
  }
}

CpuStreams default_cpu_streams() { return env_cpu_streams().value_or(CpuStreams::comm); }

CpuStreams parse_cpu_streams(const std::string& s) {
  for (CpuStreams c : {CpuStreams::none, CpuStreams::comm, CpuStreams::all})
    if (s == cpu_streams_name(c)) return c;
  ZRT_THROW(InvalidArgument, "CPU streams '", s, "' is not one of none, comm, all");
}

// Note [Initial values agree across ranks]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every rank passes a unit the same initial values, and each rank keeps
// only its shards of them: values that differ (each rank seeding its
// generator by rank) would train a mix of the ranks' models, the same on
// no rank, with nothing said. add_unit therefore gathers from every rank a
// digest of the values it was given (xxHash64 of each parameter's values as
// given, the digests a later tie checks, in order) and the first parameter
// that is not finite, and every rank ends
// in the same error when a digest differs or a value is NaN or infinite
// (which would otherwise stay in the weights: its gradient is finite, so no
// step is skipped). Values drawn where the shards live (Note [Sharded
// initialisation]), values on a device and a dry run's stand-ins are not
// read: nothing there to compare on the host. A unit one rank refuses on
// its own (a repeated name, an integer buffer, a tie that overlaps or whose
// values changed) is refused in the same collective, by every rank, in that
// rank's words: under MPI or NCCL a rank that threw alone would leave the
// others waiting there for the timeout.
namespace {
// A digest of a tensor's values as a unit was given them (0: none read, a
// CPU tensor with memory only). Callers read only what check_initial_values
// reads: a model's stand-in (init, or a dry run) has a fake address and no
// memory behind it, which this cannot tell.
std::uint64_t values_digest(const Tensor& t) {
  if (!t.device().is_cpu() || t.numel() == 0 || t.is_freed()) return 0;
  return XXH64(t.data_ptr(), t.nbytes(), 0) | 1;  // never 0
}
}  // namespace

void ZeroModule::check_initial_values(const std::string& unit, const std::vector<NamedParam>& ps,
                                      const std::vector<std::uint64_t>& digests,
                                      const std::string& refusal) {
  ZRT_CHECK_STATE(digests.size() == ps.size(), "check_initial_values: ", digests.size(),
                  " digests for ", ps.size(), " parameters");
  struct Summary {
    std::uint64_t layout = 0;  // names and shapes: FlatParamHandle names a difference there
    std::uint64_t digest = 0;
    std::int64_t non_finite = -1;  // index into ps, -1: none
    std::int64_t refused = 0;      // 1: this rank's `refusal` says why
  } mine;
  mine.refused = refusal.empty() ? 0 : 1;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const NamedParam& p = ps[i];
    const std::string id = p.fqn() + shape_str(p.tensor.shape()) + ";";
    mine.layout = XXH64(id.data(), id.size(), mine.layout);
    if (p.init || options_.dry_run || !p.tensor.device().is_cpu() || p.tensor.numel() == 0)
      continue;
    // A second name of one tensor (tied in the unit) has the first's values,
    // and may be the stand-in of a parameter drawn in its shards.
    const bool second_name =
        std::any_of(ps.begin(), ps.begin() + static_cast<std::ptrdiff_t>(i),
                    [&](const NamedParam& q) { return same_tensor(q.tensor, p.tensor); });
    if (second_name) continue;
    mine.digest = XXH64(&digests[i], sizeof digests[i], mine.digest);
    if (mine.non_finite < 0 && kernels::has_non_finite(p.tensor))
      mine.non_finite = static_cast<std::int64_t>(i);
  }
  const auto all = world_->all_gather_bytes(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(&mine), sizeof mine));
  std::vector<Summary> ranks(all.size());
  for (std::size_t r = 0; r < all.size(); ++r) std::memcpy(&ranks[r], all[r].data(), sizeof mine);
  // Every rank refuses the unit one rank refused, with its words (each
  // rank has its own tensors): none is left waiting in a later collective.
  if (std::any_of(ranks.begin(), ranks.end(), [](const Summary& r) { return r.refused != 0; })) {
    const auto said = world_->all_gather_bytes(std::span<const std::byte>(
        reinterpret_cast<const std::byte*>(refusal.data()), refusal.size()));
    for (std::size_t r = 0; r < said.size(); ++r)
      if (!said[r].empty())
        ZRT_THROW(InvalidArgument, "ZeroModule::add_unit('", unit,
                  "'): ", said.size() > 1 ? detail::concat("on rank ", r, ", ") : std::string(),
                  std::string_view(reinterpret_cast<const char*>(said[r].data()), said[r].size()));
  }
  // Other names or shapes on some rank: named over the world, since the
  // handle compares only within its zero1 group (a rank alone under
  // no-shard, one replica under hybrid), where the element counts may agree.
  if (std::any_of(ranks.begin(), ranks.end(),
                  [&](const Summary& r) { return r.layout != ranks[0].layout; })) {
    Settings layout;
    for (std::size_t i = 0; i < ps.size(); ++i)
      layout.emplace_back(detail::concat("parameter ", i),
                          detail::concat("'", ps[i].fqn(), "' ", shape_str(ps[i].tensor.shape())));
    ZRT_THROW(InvalidArgument, "ZeroModule::add_unit('", unit,
              "'): the ranks passed other parameters (every rank adds the same units in the same "
              "order, with the same names and shapes):",
              indented_lines(differing_settings(*world_, layout)));
  }
  for (std::size_t r = 0; r < ranks.size(); ++r)
    ZRT_CHECK_ARG(ranks[r].non_finite<0, "ZeroModule::add_unit('", unit, "'): parameter '",
                                      ps[static_cast<std::size_t>(ranks[r].non_finite)].fqn(),
                                      "' holds NaN or ", "infinite values", ranks.size()> 1
                      ? " on rank " + std::to_string(r)
                      : "",
                  ": initial values must be finite");
  for (std::size_t r = 1; r < ranks.size(); ++r)
    ZRT_CHECK_ARG(ranks[r].digest == ranks[0].digest, "ZeroModule::add_unit('", unit, "'): rank ",
                  r, " passed other initial values than rank 0, or them in another dtype (every ",
                  "rank must pass the same values: seed each rank's generator alike)");
}

ZeroModule::Unit ZeroModule::add_unit(const std::string& name,
                                      const std::vector<std::pair<std::string, Tensor>>& params) {
  std::vector<NamedParam> named;
  for (const auto& [pname, value] : params) named.push_back({name, pname, value});
  return add_unit(name, named);
}

ZeroModule::Unit ZeroModule::add_unit(const std::string& name,
                                      const std::vector<NamedParam>& params) {
  ZRT_CHECK_CALL(!optimizer_, "ZeroModule::add_unit('", name,
                 "'): units must be added before the optimizer is made (by the first step(), "
                 "save_checkpoint, load_checkpoint or optimizer())");
  const std::size_t index = handles_.size();
  const Unit unit = unit_at(index);
  // This rank's first reason to refuse the unit, said on every rank with the
  // initial values' check: a rank that threw alone here would leave the
  // others waiting in that collective.
  std::string refusal;
  const auto refuse_unless = [&](bool fine, const auto&... why) {
    if (!fine && refusal.empty()) refusal = detail::concat(why...);
  };
  // A checkpoint names every unit and parameter (its index refuses an empty name).
  refuse_unless(!name.empty(), "a unit needs a name: checkpoints and messages go by it");
  refuse_unless(!unit_names_.count(name),
                "a unit of that name was added before; units need names of their own");
  for (const auto& p : params)
    refuse_unless(!p.name.empty(), "a parameter of ", p.tensor.str(),
                  " has an empty name: checkpoints and messages go by it");
  // A tensor of an earlier unit here is that unit's parameter used again
  // (Note [Parameters tied across units]): copying it would silently untie
  // it (two masters, two gradients). Memory that only overlaps one is refused.
  std::vector<TiedParam> ties;
  std::vector<NamedParam> own;
  for (const auto& p : params) {
    const std::size_t begin = static_cast<std::size_t>(p.tensor.offset()) * p.tensor.itemsize();
    const std::size_t end = begin + p.tensor.nbytes();
    const SeenParam* tied = nullptr;
    const auto bucket = seen_by_storage_.find(p.tensor.storage_ptr().get());
    const std::vector<std::size_t> none;
    for (std::size_t s : bucket == seen_by_storage_.end() ? none : bucket->second) {
      const SeenParam& seen = seen_params_[s];
      ++tie_candidates_checked_;
      const auto storage = seen.storage.lock();
      if (!storage || storage != p.tensor.storage_ptr() || end <= seen.begin || seen.end <= begin)
        continue;
      refuse_unless(
          seen.begin == begin && seen.dtype == p.tensor.dtype() && seen.shape == p.tensor.shape(),
          "parameter '", p.fqn(), "' shares part of its memory with parameter '", seen.fqn,
          "' of unit '", handles_[seen.at.unit.index()]->name(),
          "': a parameter tied across units must be the same tensor (storage, offset, dtype and "
          "shape)");
      // One buffer passed again after its values changed is a new
      // parameter's values, not the first one's: a tie would drop them.
      // (Read only where the owner's values were: a model's stand-in has
      // none; 0 where the memory has gone since.)
      // Refused with the initial values' check, on every rank together.
      const std::uint64_t now = seen.digest == 0 ? 0 : values_digest(p.tensor);
      refuse_unless(now == 0 || now == seen.digest, "parameter '", p.fqn(),
                    "' is the buffer of parameter '", seen.fqn, "' of unit '",
                    handles_[seen.at.unit.index()]->name(),
                    "', so it would be tied to it, but its values changed since: pass a tensor of "
                    "its own (a copy) for a parameter of its own, or the buffer unchanged for a "
                    "tie");
      tied = &seen;
      break;
    }
    if (!tied) {
      own.push_back(p);
      continue;
    }
    ties.push_back({unit, p.fqn(), tied->at});
  }
  // Inside the unit too: two names of one tensor are one parameter (tied),
  // but memory shared otherwise (a view in another shape, a slice) would be
  // copied into two parameters that no longer share it, silently.
  for (std::size_t i = 0; i < own.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      refuse_unless(
          !own[i].tensor.overlaps(own[j].tensor) || same_tensor(own[i].tensor, own[j].tensor),
          "parameter '", own[i].fqn(), "' shares part of its memory with parameter '", own[j].fqn(),
          "' of this unit: two names of one parameter must be the same tensor "
          "(storage, offset, dtype and shape); pass a copy for a parameter of its own");
  // Full names are the module's keys (find_param, full_params, checkpoints):
  // "a" + "b.c" and "a.b" + "c" are one name.
  std::unordered_set<std::string> names;
  for (const auto& p : params) {
    const bool earlier = param_names_.count(p.fqn()) > 0;
    refuse_unless(
        !earlier && names.insert(p.fqn()).second, "parameter name '", p.fqn(), "' is ",
        earlier ? "already a parameter's name in an earlier unit" : "given twice in this unit",
        "; every parameter needs a full name of its own");
  }
  refuse_unless(!params.empty(), "no parameters");
  // Trained in fp32 whatever their dtype: an integer buffer would silently
  // become a trained float.
  for (const auto& p : params)
    refuse_unless(is_floating(p.tensor.dtype()), "parameter '", p.fqn(), "' is ",
                  dtype_name(p.tensor.dtype()),
                  ": parameters are floating point (keep integer buffers out of the units)");
  refuse_unless(!own.empty(),
                "every parameter is tied to an earlier unit's; "
                "a unit needs one of its own (put its modules in the owner's unit)");
  // Each parameter's values as given: a later tie must still hold them, and
  // every rank must have given the same (check_initial_values). A second
  // name of one tensor has the first's (and may be the stand-in of a
  // parameter drawn in its shards, with no memory behind it).
  std::vector<std::uint64_t> own_digests;
  for (std::size_t i = 0; i < own.size(); ++i) {
    const NamedParam& p = own[i];
    const auto first =
        std::find_if(own.begin(), own.begin() + static_cast<std::ptrdiff_t>(i),
                     [&](const NamedParam& q) { return same_tensor(q.tensor, p.tensor); });
    own_digests.push_back(first != own.begin() + static_cast<std::ptrdiff_t>(i)
                              ? own_digests[static_cast<std::size_t>(first - own.begin())]
                          : p.init || options_.dry_run ? 0
                                                       : values_digest(p.tensor));
  }
  // Fresh fp32 copies: a handle claims its parameters' memory, and several
  // ranks of one process may share the initial values. One copy per distinct
  // tensor, so names tied to one tensor stay one parameter.
  std::vector<std::pair<const Tensor*, Tensor>> copies;  // source, its copy
  std::vector<NamedParam> owned;
  for (const auto& p : own) {
    auto same = std::find_if(copies.begin(), copies.end(),
                             [&](const auto& c) { return same_tensor(*c.first, p.tensor); });
    if (same == copies.end()) {
      // A dry run reads no value: an unbacked stand-in of the copy (Note [Dry runs]).
      // A parameter drawn in its shards has no value to copy: its own
      // stand-in serves (Note [Sharded initialisation]).
      Tensor copy = p.init             ? p.tensor
                    : options_.dry_run ? Tensor::empty(p.tensor.shape(), DType::f32, Device::cpu(),
                                                       dry_host_allocator())
                                       : p.tensor.to(DType::f32);
      same = copies.insert(copies.end(), {&p.tensor, copy});
    }
    owned.push_back({p.module_path, p.name, same->second, p.pad_rows, p.init});
  }
  check_initial_values(name, owned, own_digests, refusal);
  FlatParamOptions o;
  o.name = name;
  o.param_dtype = options_.dtype;
  o.grad_reduce = options_.grad_reduce;
  o.gather = options_.gather;
  o.reshard_after_forward = plan_->reshard_after_forward;
  o.reshard_after_backward = plan_->reshard_after_backward;
  o.master_on_host = options_.offload_optimizer.kind == OptimizerOffload::Kind::host;
  o.device = options_.device;
  o.allocator = allocator_;
  o.host_allocator = options_.dry_run ? dry_host_allocator() : options_.host_allocator;
  o.stream = stream();
  o.comm_stream = comm_stream();
  handles_.push_back(std::make_unique<FlatParamHandle>(std::move(owned), plan_->groups, o));
  const FlatParamHandle& h = *handles_.back();
  // A layer bound to param_views and run outside the unit's scopes reads a
  // freed view: its message says where the memory is (Note [Freed storage]).
  const std::string grad_note =
      "has no memory outside its unit's backward scope: call the layer's backward inside "
      "m.backward(unit) of unit '" +
      name + "', m the ZeroModule whose param_views gave the layer this view";
  // A tied parameter is also used in the scopes of its users' units.
  auto set_param_note = [&](std::size_t owner) {
    const std::string users = tie_users(owner);
    handles_[owner]->param(0).storage().set_freed_note(
        "has no memory outside its unit's scope: call the layer inside m.forward(unit) or "
        "m.backward(unit) of unit '" +
        handles_[owner]->name() + "'" +
        (users.empty() ? "" : " (or of a unit that uses it tied: " + users + ")") +
        ", m the ZeroModule whose param_views gave the layer this view");
  };
  h.grad(0).storage().set_freed_note(grad_note);
  unsynced_.push_back(0);
  users_inside_.emplace_back();
  failed_.push_back(false);
  synced_.push_back(false);
  tie_grads_.push_back(0);
  unit_names_.insert(name);
  param_names_.insert(names.begin(), names.end());
  for (std::size_t i = 0; i < own.size(); ++i)
    if (const NamedParam& p = own[i]; p.tensor.numel() > 0) {
      const std::size_t begin = static_cast<std::size_t>(p.tensor.offset()) * p.tensor.itemsize();
      seen_by_storage_[p.tensor.storage_ptr().get()].push_back(seen_params_.size());
      seen_params_.push_back({p.tensor.storage_ptr(),
                              begin,
                              begin + p.tensor.nbytes(),
                              p.tensor.dtype(),
                              p.tensor.shape(),
                              p.fqn(),
                              {unit, h.index_of(p.fqn())},
                              own_digests[i]});
    }
  for (TiedParam& t : ties) {
    const ParamSpec& spec = handles_[t.owner.unit.index()]->layout().params()[t.owner.index];
    Tensor grad = Tensor::from_storage(std::make_shared<Storage>(0, allocator_, stream()),
                                       spec.padded_shape(), options_.dtype, 0, t.fqn + ".grad");
    grad.storage().set_freed_note(grad_note);
    ties_.push_back({std::move(t), std::move(grad)});
  }
  set_param_note(index);
  for (const Tie& t : ties_)
    if (t.param.user == unit) set_param_note(t.param.owner.unit.index());
  return unit;
}

namespace {

// Two weak pointers of one control block (both empty: alike too).
bool same_owner(const std::weak_ptr<const bool>& a, const std::weak_ptr<const bool>& b) {
  return !a.owner_before(b) && !b.owner_before(a);
}

}  // namespace

bool ZeroModule::Unit::operator==(const Unit& o) const {
  return index_ == o.index_ && same_owner(module_, o.module_);
}

std::size_t ZeroModule::index_of(const Unit& unit, const char* call) const {
  ZRT_CHECK_ARG(same_owner(unit.module_, alive_), "ZeroModule::", call, ": ",
                same_owner(unit.module_, {}) ? "a default-made ZeroModule::Unit"
                : unit.module_.expired()     ? "a unit of a ZeroModule destroyed since"
                                             : "a unit made by another ZeroModule's add_unit",
                " was given; a module takes only the units its own add_unit returned");
  ZRT_CHECK_STATE(unit.index_ < handles_.size(), "ZeroModule: no unit ", unit.index_, " (",
                  handles_.size(), " units)");
  return unit.index_;
}

FlatParamHandle& ZeroModule::handle(Unit unit) const { return *handles_[index_of(unit, "handle")]; }

ZeroModule::Unit ZeroModule::unit(std::size_t index) const {
  ZRT_CHECK_ARG(index < handles_.size(), "ZeroModule::unit: no unit ", index, " (", handles_.size(),
                " units)");
  return unit_at(index);
}

const ZeroModule::Tie* ZeroModule::find_tie(std::size_t user, const std::string& name) const {
  const std::string full = handles_[user]->name() + "." + name;
  for (const Tie& t : ties_)
    if (t.param.user.index() == user && (t.param.fqn == full || t.param.fqn == name)) return &t;
  return nullptr;
}

void ZeroModule::open_ties(std::size_t user, bool backward, std::vector<std::size_t>* opened,
                           std::vector<std::pair<std::size_t, std::uint64_t>>* open) {
  for (const Tie& t : ties_) {
    if (t.param.user.index() != user) continue;
    const std::size_t owner = t.param.owner.unit.index();
    // The owner's sync has reduced its gradient: this one would miss the step.
    ZRT_CHECK_CALL(!backward || !synced_[owner], "ZeroModule: the backward scope of unit '",
                   handle_at(user).name(), "' uses parameter '",
                   handle_at(owner).fqn(t.param.owner.index), "' (as '", t.param.fqn,
                   "') of unit '", handle_at(owner).name(),
                   "', whose backward already synced this step; run "
                   "the owner's backward after its users' (Note [Parameters tied across units])");
    if (std::find(opened->begin(), opened->end(), owner) != opened->end() ||
        std::find_if(open->begin(), open->end(), [&](const auto& o) { return o.first == owner; }) !=
            open->end())
      continue;
    FlatParamHandle& h = handle_at(owner);
    if (h.state() == HandleState::forward || h.state() == HandleState::backward_pre) {
      // Open in its own scope or another user's, which must outlast this one.
      users_inside_[owner].users.push_back(user);
      open->emplace_back(owner, users_inside_[owner].hold);
      continue;
    }
    ZRT_CHECK_STATE(h.state() == HandleState::idle, "ZeroModule: unit '", handle_at(user).name(),
                    "' uses parameter '", h.fqn(t.param.owner.index), "' of unit '", h.name(),
                    "', which is in state ", handle_state_name(h.state()));
    h.pre_forward();
    opened->push_back(owner);
  }
  if (!backward) return;
  for (Tie& t : ties_)
    if (t.param.user.index() == user) {
      alloc_storage(t.grad);
      kernels::zero(t.grad, stream());
    }
}

void ZeroModule::leave_owner(std::size_t user, std::size_t owner, std::uint64_t hold) {
  UsersInside& in = users_inside_[owner];
  if (in.hold != hold) return;  // that hold ended before this scope (end_hold said so)
  in.users.erase(std::find(in.users.begin(), in.users.end(), user));
}

void ZeroModule::end_hold(std::size_t owner, const std::string& what) {
  UsersInside& in = users_inside_[owner];
  ++in.hold;
  if (in.users.empty()) return;
  std::string users;
  for (std::size_t u : in.users) users += (users.empty() ? "'" : ", '") + handle_at(u).name() + "'";
  in.users.clear();
  ZRT_THROW_CALL("ZeroModule: ", what, " closed before the scope of unit ", users,
                 ", opened inside it, that uses the parameters of unit '", handle_at(owner).name(),
                 "' tied: close that scope first, as scopes close in the reverse order they "
                 "opened (the parameters have no memory after this one)");
}

void ZeroModule::add_tie_grads(std::size_t user) {
  std::exception_ptr failure;
  for (Tie& t : ties_) {
    if (t.param.user.index() != user || t.grad.is_freed()) continue;
    const std::size_t owner = t.param.owner.unit.index();
    try {
      ZRT_CHECK_CALL(!synced_[owner], "ZeroModule: the backward scope of unit '",
                     handle_at(user).name(), "' ends after unit '", handle_at(owner).name(),
                     "' synced the gradient of its parameter '",
                     handle_at(owner).fqn(t.param.owner.index), "' (used as '", t.param.fqn,
                     "') this step; run the owner's backward after its users' "
                     "(Note [Parameters tied across units])");
      handle_at(owner).add_to_grad(t.param.owner.index, t.grad);
      ++tie_grads_[owner];
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
    free_storage(t.grad);  // stream-ordered: the addition above is queued before any reuse
  }
  if (failure) std::rethrow_exception(failure);
}

namespace {

// "weight" in unit "fc1" is "fc1.weight"; a full name works too.
std::size_t scope_param_index(const FlatParamHandle* h, const std::string& name) {
  ZRT_CHECK_CALL(h != nullptr, "ZeroModule: parameter '", name, "' of a closed scope");
  auto i = h->find(h->name() + "." + name);
  if (!i) i = h->find(name);
  ZRT_CHECK_ARG(i.has_value(), "ZeroModule: unit '", h->name(), "' has no parameter '", name,
                "' (nor '", h->name(), ".", name, "')");
  return *i;
}

}  // namespace

ZeroModule::ParamViews ZeroModule::param_views(Unit unit, const std::string& name) const {
  return param_views_at(index_of(unit, "param_views"), name);
}

ZeroModule::ParamViews ZeroModule::param_views_at(std::size_t unit, const std::string& name) const {
  const FlatParamHandle& h = handle_at(unit);
  if (!h.find(h.name() + "." + name) &&
      !h.find(name))  // the unit's own names first, as scopes always did
    if (const Tie* t = find_tie(unit, name))
      return {handle_at(t->param.owner.unit.index()).param(t->param.owner.index), t->grad};
  const std::size_t i = scope_param_index(&h, name);
  return {h.param(i), h.grad(i)};
}

std::vector<ZeroModule::TiedParam> ZeroModule::tied_params() const {
  std::vector<TiedParam> out;
  for (const Tie& t : ties_) out.push_back(t.param);
  return out;
}

ZeroModule::Scope ZeroModule::forward(Unit unit, Stream stream) {
  return Scope(this, index_of(unit, "forward"), false, false, stream);
}
ZeroModule::Scope ZeroModule::backward(Unit unit, bool sync, Stream stream) {
  return Scope(this, index_of(unit, "backward"), true, sync, stream);
}
void ZeroModule::prefetch(Unit unit) { prefetch_at(index_of(unit, "prefetch")); }

void ZeroModule::prefetch_at(std::size_t unit) {
  FlightRecorder::Caller caller(*world_->flight_recorder(),
                                "prefetch('" + handle_at(unit).name() + "')");
  handle_at(unit).unshard();
  for (const Tie& t : ties_)
    if (t.param.user.index() == unit) handle_at(t.param.owner.unit.index()).unshard();
}

void ZeroModule::set_background_save_wait(std::function<void()> wait) {
  ZRT_CHECK_ARG(!wait || !background_save_wait_,
                "ZeroModule: a BackgroundCheckpointSaver of this module exists already; a "
                "module has one at a time (Note [Checkpoints wait for the save in flight])");
  background_save_wait_ = std::move(wait);
}

void ZeroModule::wait_for_background_save(const char* call) {
  if (!background_save_wait_) return;
  try {
    background_save_wait_();
  } catch (const CheckpointError& e) {
    // Alike on every rank, as the save's own error is.
    ZRT_THROW(CheckpointError, call, ": waited first for the background save in flight, which ",
              "failed, so nothing was ",
              std::string(call) == "load_checkpoint" ? "loaded" : "saved", ": ", e.what());
  }
}

void ZeroModule::wait_for_reduced_grads() {
  for (auto& h : handles_) h->wait_for_reduced_grads();
}

ZeroAdamW& ZeroModule::optimizer() {
  if (!optimizer_) {
    ZRT_CHECK_CALL(!handles_.empty(), "ZeroModule: no units were added");
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
// A unit with no synced backward since the last step (a layer the step's
// forward skipped, a frozen branch) steps on a zero gradient, as torch's
// AdamW after zero_grad(set_to_none=False): its gradient shard still holds
// the last reduce-scatter's values (or a skipped step's non-finite ones),
// which the step would otherwise apply again with nothing said.
// Note [A failed backward skips the step]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A backward scope that ends by an exception (the caller's, while it
// unwinds) or whose close fails (an out-of-memory error in its reduction)
// leaves a partial gradient: its reduction still runs in the first case, so
// the ranks stay in step, and may have half run in the second. Stepping on
// it would apply part of a micro-batch with nothing said; refusing on that
// rank alone would leave the others waiting in the step's collectives. So
// the unit is marked failed, and the next step() fills its gradient shard
// with NaN before the statistics: the agreed non-finite flag (Note [One
// optimizer step]) skips the step on every rank, updating nothing, and the
// skip is counted and reported as an overflow's is. discard_gradients()
// drops the mark with the gradients, for a caller that retries (a smaller
// micro-batch after an out-of-memory error). The handle returns to idle
// when its post_backward fails, its compute-dtype gradient freed, so the
// module stays usable.
// Note [Gathers after the update]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The next step starts by gathering its first units: the first stage's
// unit, which its forward enters at once, and with prefetch the next
// stages'. Issued there, those gathers wait for the whole optimizer step,
// every unit's update, and the first forward waits for them in turn. So
// step() takes the units the engine will want first (in the order it
// wants them) and prefetches each as soon as its update is issued and the
// earlier units whose parameters it uses are updated (Note [Parameters
// tied across units]): the gather (with the cast of the new master to the
// compute dtype, unshard()'s first after an update) runs on the
// communication stream while the compute stream updates the next units.
// With the moments on disk (Note [Optimizer state on disk]) a unit is
// handed over once its last chunk is updated and its write is queued, not
// once every unit's is: the gathers then overlap the later units' updates
// and their reads and writes of the scratch file as they overlap the
// in-memory update, and the units gathered early hold their unsharded
// parameters beside the two chunk buffers (as they hold them beside the
// in-memory moments; a dry run's plan has both, Note [Dry runs]).
// Nothing else changes: the same gathers of the same values in the same
// order on every rank, only issued earlier, so training is bit for bit the
// same; the unit then stays gathered between steps (the memory its forward
// prefetch would take at the step's start), and the next forward finds it
// gathered. A skipped step (non-finite gradients) updates nothing and
// gathers nothing early. Every other step does, the last one too (the
// module cannot know there is no next step), so every step issues the same
// gathers (its traffic, Note [Bytes on the link], is the same) but the first,
// which also gathers its own first units, and a run ends with those units
// gathered once for nothing. A checkpoint loaded between steps synchronizes the
// module before it overwrites the masters and marks them updated, so a
// gathered unit is gathered again.
// Note [No step inside a step]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// step() hands control back to the caller once, in before_update, after the
// gradient statistics are read and before any update. A step() made there
// updated twice from one gradient, a discard_gradients() there zeroed the
// gradients the outer step then counted as a step, and a load_checkpoint()
// there got the outer step's update applied on top of what it loaded: all
// with nothing said. So these refuse while a step runs (stepping()); what
// only reads (full_params(), save_checkpoint()) stays allowed. ZeroAdamW
// keeps the same rule for a caller that steps it directly: its step() and
// its loads of counters and moments refuse inside its own step, from
// before_update or after_update.
StepResult ZeroModule::step(double lr, const std::function<void()>& before_update,
                            std::span<const Unit> gather_after_update) {
  ZRT_CHECK_CALL(!stepping(),
                 "ZeroModule::step: called while a step() runs (from its before_update, or the "
                 "optimizer's callbacks); a step inside a step would update twice from one "
                 "gradient");
  const SteppingFlag stepping(stepping_);
  std::vector<std::size_t> gather_next;
  for (const Unit& u : gather_after_update) gather_next.push_back(index_of(u, "step"));
  ZRT_CHECK_CALL(!handles_.empty(), "ZeroModule::step: no units were added");
  expect_scopes_closed("step");
  FlightRecorder::Caller caller(*world_->flight_recorder(), "step()");
  for (std::size_t u = 0; u < handles_.size(); ++u)
    ZRT_CHECK_CALL(unsynced_[u] == 0, "ZeroModule::step: unit '", handles_[u]->name(), "' has ",
                   unsynced_[u],
                   " backward scope(s) with sync=false after its last sync; the last "
                   "micro-batch's backward must sync (backward(unit, true)) before step()");
  for (std::size_t u = 0; u < handles_.size(); ++u)
    ZRT_CHECK_CALL(tie_grads_[u] == 0, "ZeroModule::step: unit '", handles_[u]->name(), "' holds ",
                   tie_grads_[u],
                   " gradient(s) of its parameters used by later units that no backward(unit, "
                   "true) of its own "
                   "reduced (Note [Parameters tied across units])");
  ZRT_CHECK_CALL(synced_since_step_,
                 "ZeroModule::step: no backward scope synced gradients since the last step; "
                 "step() would apply weight decay alone");
  // Note [ZeroModule steps on synced gradients]: no stale gradient stepped on.
  for (std::size_t u = 0; u < handles_.size(); ++u)
    if (!synced_[u]) {
      handles_[u]->wait_for_reduced_grads();  // one a failed close issued may be in flight
      handles_[u]->zero_grad();
    }
  // Note [A failed backward skips the step].
  for (std::size_t u = 0; u < handles_.size(); ++u)
    if (failed_[u]) handles_[u]->poison_grad();
  // ZeroAdamW::step waits for the reductions in flight itself.
  // The record of synced units ends with a step taken or skipped, and with
  // one that failed after it began updating; one that throws before (a veto
  // of before_update, a bad lr) leaves the gradients to step on again or to
  // discard.
  auto end_record = [&] {
    synced_since_step_ = false;
    synced_.assign(synced_.size(), false);
    failed_.assign(failed_.size(), false);
  };
  // The last unit whose update the gather of unit u waits for: u, or an
  // owner of a parameter it uses. The optimizer updates the units in order.
  auto last_needed = [&](std::size_t u) {
    std::size_t last = u;
    for (const Tie& t : ties_)
      if (t.param.user.index() == u) last = std::max(last, t.param.owner.unit.index());
    return last;
  };
  std::size_t next = 0;
  bool updating = false;
  try {
    const StepResult r =
        optimizer().step(lr, scaler_.get(), before_update, [&](std::size_t updated) {
          updating = true;
          for (; next < gather_next.size() && last_needed(gather_next[next]) <= updated; ++next)
            prefetch_at(gather_next[next]);
        });
    end_record();
    return r;
  } catch (const TooManySkippedSteps&) {  // skipped: its counters moved
    end_record();
    throw;
  } catch (...) {
    if (updating) end_record();
    throw;
  }
}

std::string ZeroModule::tie_users(std::size_t owner) const {
  std::string users;
  for (const Tie& t : ties_)
    if (t.param.owner.unit.index() == owner &&
        users.find("'" + handle_at(t.param.user.index()).name() + "'") == std::string::npos)
      users += (users.empty() ? "" : ", ") + ("'" + handle_at(t.param.user.index()).name() + "'");
  return users;
}

void ZeroModule::expect_scopes_closed(const char* call) const {
  for (std::size_t u = 0; u < handles_.size(); ++u) {
    const FlatParamHandle& h = *handles_[u];
    // A user's scope gathers its owner too (Note [Parameters tied across units]).
    const std::string users = tie_users(u);
    ZRT_CHECK_CALL(
        h.state() == HandleState::idle, "ZeroModule::", call, ": unit '", h.name(), "' has ",
        h.state() == HandleState::forward ? "a forward"
        : h.state() == HandleState::backward_pre || h.state() == HandleState::backward_post
            ? "a backward"
            : "an operation",
        " scope open",
        users.empty() ? std::string()
                      : " (its own, or one of a unit that uses its parameters: " + users + ")",
        "; close every scope first");
  }
}

void ZeroModule::discard_gradients() {
  // Note [No step inside a step].
  ZRT_CHECK_CALL(!stepping(),
                 "ZeroModule::discard_gradients: called while a step() runs (from its "
                 "before_update, or the optimizer's callbacks); to withhold that step's update, "
                 "throw from before_update");
  expect_scopes_closed("discard_gradients");
  wait_for_reduced_grads();  // the reductions in flight write the shards zeroed here
  for (auto& h : handles_) h->zero_grad();
  synced_since_step_ = false;
  synced_.assign(synced_.size(), false);
  failed_.assign(failed_.size(), false);
  unsynced_.assign(unsynced_.size(), 0);
  tie_grads_.assign(tie_grads_.size(), 0);
}

std::map<std::string, Tensor> ZeroModule::full_params() {
  ZRT_CHECK_ARG(!options_.dry_run,
                "ZeroModule::full_params: a dry run holds no values (Note [Dry runs])");
  // Names the call in a mismatch with another rank's (Note [Collective contract]).
  expect_scopes_closed("full_params");
  FlightRecorder::Caller caller(*world_->flight_recorder(), "full_params()");
  std::map<std::string, Tensor> out;
  for (auto& h : handles_) {
    const auto values = h->summon_full_params();
    for (std::size_t i = 0; i < values.size(); ++i) out[h->fqn(i)] = values[i].to(Device::cpu());
  }
  return out;
}

std::optional<ZeroModule::ParamLocation> ZeroModule::find_param(const std::string& name) const {
  for (std::size_t u = 0; u < handles_.size(); ++u)
    if (const auto i = handles_[u]->find(name)) return ParamLocation{unit_at(u), *i};
  for (const Tie& t : ties_)
    if (t.param.fqn == name) return t.param.owner;
  return std::nullopt;
}

Tensor ZeroModule::full_param(const std::string& name) {
  ZRT_CHECK_ARG(!options_.dry_run, "ZeroModule::full_param('", name,
                "'): a dry run holds no values (Note [Dry runs])");
  const auto at = find_param(name);
  ZRT_CHECK_ARG(at.has_value(), "ZeroModule: no unit has a parameter named '", name,
                "' (names are full_params()'s: \"unit.name\" or the module path's)");
  ZRT_CHECK_CALL(handles_[at->unit.index()]->state() == HandleState::idle,
                 "ZeroModule::full_param: unit '", handles_[at->unit.index()]->name(),
                 "' has a scope open; close it first");
  FlightRecorder::Caller caller(*world_->flight_recorder(), "full_param('" + name + "')");
  return handles_[at->unit.index()]->summon_full_params()[at->index].to(Device::cpu());
}

}  // namespace zrt::optim
