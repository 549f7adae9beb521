// ZeroModule: the one front door to training under ZeRO, for a model of
// one's own and for the model zoo's TrainingEngine alike. Parameters are
// registered in wrap units (one FlatParamHandle each); a forward or backward
// scope gathers a unit's parameters and gives their unsharded views, the end
// of the scope reshards them; step() runs ZeroAdamW on the zero1 shards (with
// dynamic loss scaling in f16); save_checkpoint / load_checkpoint
// (optim/checkpoint/module_checkpoint.h) save and restore all of it, and
// reshard on load to another rank count or strategy.
//
//   zrt::optim::ZeroModule m(world, {.strategy = ShardingStrategy::full_shard});
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
// backward of the step, so communication happens once; a second syncing
// backward of one unit in a step is refused (it would replace the gradient
// the first reduced). Gradients are averaged over the ranks (each rank's
// loss is a mean over its own rows).
//
// Note [The stream a scope serves]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A scope's views are written on the module's streams (gathered on the
// communication stream, gradients zeroed on the compute stream) and read
// and written by the caller's kernels on the stream the caller runs them
// on. The scope is told that stream (forward(u, stream), backward(u, sync,
// stream)) and orders both ways: when it opens, that stream waits for the
// module's work on the views (the host blocks for the calling thread's
// stream, through the watchdog); when it closes, the module's reshard and
// reduction wait for the work issued to that stream. The default is the
// stream a layer or kernel called without one runs on: the calling thread
// on the cpu, CUDA's legacy default stream on a GPU. So a program that
// passes no stream anywhere is right in every mode of Note [Streams of a
// CPU module] and on CUDA; one that runs its kernels on the module's
// compute stream says so (forward(u, m.stream())), and then nothing waits
// on the host, as the engine does. The order costs nothing where the
// caller's stream is the compute stream (none and comm on the cpu). A
// scope told one stream whose views are used on another is the caller's
// race: Scope::stream() names the stream to pass to the layers.
//
// Note [Parameters tied across units]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A tensor given to a later unit that an earlier unit already holds (same
// storage, offset, dtype and shape: an LM head tied to the embedding of the
// first unit) stays one parameter. The earlier unit owns it: its flat
// parameter holds the one master copy, and full_params(), checkpoints and
// exports hold it once, under the owner's name; the later unit (the user)
// records a tie and leaves it out of its own flat parameter. find_param,
// full_param and the user's scopes resolve the user's name to the owner's
// parameter.
//  - A user's forward or backward scope needs the owner's parameter
//    unsharded: when the owner is idle the scope opens it as a forward does
//    (pre_forward; prefetch(user) gathers it ahead too) and ends that at
//    close (post_forward, resharding per the strategy). Inside an open scope
//    of the owner it is simply used, and the owner's scope closing first
//    throws InvalidState (the parameter has no memory after it: Note [Views
//    live in their scopes]); the owner's own scope cannot open inside a user's.
//  - A user's backward scope hands out, for the tied name, a gradient buffer
//    of its own (compute dtype, zeroed, alive for the scope). At close it is
//    added into the owner's fp32 unsharded gradient at the parameter's place
//    (FlatParamHandle::add_to_grad), and the owner's own post_backward adds
//    onto that sum: the gradients of both uses meet before the owner's one
//    reduce-scatter, so every rank's shard of the parameter gets the full
//    gradient (FSDP's known failure with such ties is a shard that never
//    updates). In bf16 and f16 the two uses are rounded separately, as two
//    uses within one unit from two backward scopes are.
//  - So the owner's backward must come after its users' in a step, as it
//    does for an embedding in the first unit: a user's backward scope after
//    the owner synced this step throws InvalidState naming both units, and
//    step() refuses an owner that holds tie gradients no sync of its own
//    reduced.
// A partial overlap with an earlier unit's parameter is refused; a unit whose
// every parameter is tied to earlier units is refused too (it would have no
// flat parameter; put its modules in the owner's unit instead).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "zrt/optim/flat_param/flat_param_handle.h"
#include "zrt/optim/flat_param/sharding_strategy.h"
#include "zrt/optim/loss_scaler.h"
#include "zrt/optim/zero_adamw.h"
#include "zrt/runtime/comm/comm_watchdog.h"
#include "zrt/runtime/comm/communicator.h"
#include "zrt/runtime/stream.h"
#include "zrt/runtime/trace.h"

namespace zrt::optim {

struct StrategyPlan;

// Note [Streams of a CPU module]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// On CUDA a ZeroModule owns a compute and a communication stream. On the
// CPU it owns what cpu_streams says (Note [CPU streams]):
//  - none: both are the calling thread; every collective finishes before it
//    returns. No overlap; nothing is ordered by events.
//  - comm (the default): collectives (parameter all-gathers, prefetch, and
//    gradient reductions) run on a communication stream with a thread of its
//    own, ordered against compute by events exactly as on CUDA, so the
//    gathers of the next units overlap this unit's compute. Compute stays on
//    the calling thread, which is fastest on the CPU.
//  - all: compute runs on a stream of its own too, asynchronous to the
//    calling thread as CUDA kernels are. Slower, and the mode that catches a
//    host read that did not wait for the compute stream; the equivalence
//    tests run it.
enum class CpuStreams { none, comm, all };
const char* cpu_streams_name(CpuStreams s);
CpuStreams parse_cpu_streams(const std::string& s);  // InvalidArgument naming the choices
// ZRT_CPU_STREAMS when set (InvalidArgument unless none, comm or all), else comm.
CpuStreams default_cpu_streams();
// ZRT_CPU_STREAMS, when set (InvalidArgument naming it when not a choice).
std::optional<CpuStreams> env_cpu_streams();

// Note [Memory limit]
// ~~~~~~~~~~~~~~~~~~~
// memory_limit caps what the module's caching allocator reserves from its
// device (CachingAllocatorConfig::memory_cap): a request that would pass it
// fails, after the cache is flushed and retried, with OutOfMemory naming the
// cap, as a full GPU fails. On CUDA it keeps a run inside part of a shared
// GPU; on the cpu it makes a rank a GPU of that size, so the mechanisms a
// model larger than its GPU needs (sharding, activation checkpointing,
// optimizer offload) are proved on CPU ranks: the master and the moments of
// --offload-optimizer host and the staging of disk offload live outside the
// cap, as pinned host memory does on CUDA. The memory plan's dry runs are
// never capped (they report what a run needs); plan_fitting compares their
// reserved peak, the quantity the cap limits, with the budget.
// On the cpu a run holds what its plan says only with CpuStreams::none:
// work queued on CPU streams holds its tensors until it runs, so a run
// whose host is ahead of its streams holds more. Little more, since an
// allocation waits for its stream's queue before the pool grows (Note
// [Allocations wait for their stream's frees]); but what another stream's
// queue holds still counts (9% over the plan's reserved peak under all in
// test_memory_plan's case).
struct ZeroModuleOptions {
  ShardingStrategy strategy = ShardingStrategy::full_shard;
  // hybrid / layer-zero group size (0: the world); other strategies take 0
  // or their own group's size (full, grad-op: the world; no-shard: 1).
  int zero3_size = 0;
  DType dtype = DType::f32;  // compute dtype: f32, bf16 or f16 (f16: dynamic loss scaling)
  // Every unit's gradient sync. Its op: avg when each rank's loss is a mean
  // over its own rows, sum when each is already divided by the global count
  // (Note [One step of the engine]).
  GradReduceOptions grad_reduce{};
  // Every unit's parameter all-gathers (Note [Quantized parameter gather]).
  ParamGatherOptions gather{};
  Device device = Device::cpu();
  AdamWOptions adamw{};  // lr comes per step
  // f16's dynamic loss scaling (Note [Loss scale updates]: GradScaler's
  // init_scale, growth_factor, backoff_factor, growth_interval, enabled,
  // and DeepSpeed's hysteresis and min_loss_scale); unset: GradScaler's
  // defaults. Refused with bf16 and f32, which scale nothing. A resume keeps
  // the checkpoint's scale and counts under these settings (Note [Loss scale updates]).
  std::optional<LossScalerOptions> loss_scaler{};
  OptimizerOffload offload_optimizer{};  // where m and v live (Note [Optimizer state on disk])
  TracerPtr tracer{};  // the world's collectives and the step's timeline; null: none
  // On cpu (Note [Streams of a CPU module]); unset: ZRT_CPU_STREAMS, else comm.
  std::optional<CpuStreams> cpu_streams{};
  // Memory for every buffer the module and its handles allocate (and the
  // engine's activations); null: a caching allocator on `device`, reserving
  // at most `memory_limit` bytes (Note [Memory limit]).
  AllocatorPtr allocator{};
  std::size_t memory_limit = 0;  // 0: what the device has
  // Host memory outside `allocator`: the master, m and v of --offload-optimizer
  // host and their gradient and staging copies (Note [Master in host memory]),
  // disk offload's chunk buffers beside a CUDA device; null: pinned on CUDA,
  // plain host memory on cpu, a dry run's own unbacked memory. The memory
  // plan passes one that counts (Note [Host memory in the plan]).
  AllocatorPtr host_allocator{};
  // Note [Dry runs] (model_zoo/trainer/memory_plan.h): the module's streams
  // drop every kernel, copy and collective, its memory is unbacked (unless
  // `allocator` and `host_allocator` are given), and add_unit reads no
  // value. cpu only. Nothing may read a value either: full_params refuses,
  // and a scope's param() and grad() are for the layers' shapes only.
  bool dry_run = false;
};

class ZeroModule {
 public:
  // Note [A unit belongs to its module]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // A Unit is what add_unit returned: the unit's place among its module's
  // units and the module that made it. Every call that takes one refuses,
  // with InvalidArgument, a Unit of another module (two models in one
  // program, or the ranks of one process, each with a module of its own:
  // the same place there is another unit, whose parameters would be used
  // without a word) and a default-made Unit. The module is known by its
  // lifetime token, not its address, so a Unit outliving its module is
  // refused by a module made later at the same address.
  class Unit {
   public:
    Unit() = default;  // no unit: refused by every call that takes one
    // Its place in the order the units were added, from 0.
    std::size_t index() const { return index_; }
    // The same unit of the same module.
    bool operator==(const Unit& o) const;

   private:
    friend class ZeroModule;
    Unit(std::size_t index, std::weak_ptr<const bool> module)
        : index_(index), module_(std::move(module)) {}
    std::size_t index_ = 0;
    std::weak_ptr<const bool> module_;  // the module's alive_ token
  };

  // Collective over `world` (it may split it into groups). Validates the
  // options (InvalidArgument naming the bad one); on CUDA it owns a compute
  // and a communication stream and a caching allocator on the device.
  ZeroModule(CommPtr world, ZeroModuleOptions options = {});
  ~ZeroModule();
  ZeroModule(const ZeroModule&) = delete;
  ZeroModule& operator=(const ZeroModule&) = delete;

  // Collective: a wrap unit of named parameters with their initial values
  // (equal on every rank; any dtype, cpu), named "unit.name". Units must be
  // added before the first step, in the same order on every rank. The same
  // tensor under two names is one parameter (tied): one master copy, one
  // gradient. A tensor given to an earlier unit, while it lives, is that
  // unit's parameter used here (Note [Parameters tied across units]); a
  // tensor that only overlaps another parameter (of this unit or an earlier
  // one) is refused with InvalidArgument naming both, and so is the same tensor whose
  // values changed since the earlier unit took it (one buffer reused for
  // two units' initial values: on the CPU, where the values are read).
  Unit add_unit(const std::string& name, const std::vector<std::pair<std::string, Tensor>>& params);
  // The same with each parameter's module path and name given (a model whose
  // names are not "unit.name"); tied names again share a tensor.
  Unit add_unit(const std::string& name, const std::vector<NamedParam>& params);

  // A unit's parameters gathered for the scope's lifetime (Note [ZeroModule scopes]).
  class Scope {
   public:
    Scope(Scope&&) noexcept;
    Scope& operator=(Scope&&) = delete;
    ~Scope();
    // A name tied to an earlier unit's parameter gives the owner's unsharded
    // parameter, and a gradient of its own (Note [Parameters tied across units]).
    // Read-only, and not checked: a write sticks in the master where the
    // unsharded parameter is its memory (fp32 over one rank, or no-shard),
    // carries into the same step's backward where the gather is kept
    // (grad-op, or a gather the forward leaves), and is lost at a reshard
    // elsewhere; a write on some ranks only makes the replicas differ (which
    // --check-consistency finds).
    Tensor param(const std::string& name) const;  // compute dtype, original shape
    Tensor grad(const std::string& name) const;   // backward scopes only: accumulate here
    // The stream the views are ready on, to pass to the layers and kernels
    // that use them (Note [The stream a scope serves]).
    Stream stream() const { return stream_; }
    // Ends the scope now (reshard; in backward, reduce if it syncs), throwing
    // what fails; the destructor can only report it.
    void close();

   private:
    friend class ZeroModule;
    Scope(ZeroModule* module, std::size_t unit, bool backward, bool sync, Stream stream);
    // The caller's stream waits for the module's work on the views.
    void serve_caller() const;
    // Expired once the module is destroyed: a scope left open then touches
    // nothing of it (Note [A scope outlives no module]).
    std::weak_ptr<const bool> module_alive_;
    ZeroModule* module_;
    std::size_t unit_;  // its index
    FlatParamHandle* handle_;
    bool backward_, sync_;
    Stream stream_;                           // the caller's (Note [The stream a scope serves])
    std::vector<std::size_t> opened_owners_;  // owners of tied parameters this scope unsharded
    // Owners of tied parameters found open (by their own scope or another
    // user's), with the hold they were found in (UsersInside::hold).
    std::vector<std::pair<std::size_t, std::uint64_t>> open_owners_;
    std::string what_;      // "the forward scope of unit 'name'", for messages
    int uncaught_at_open_;  // std::uncaught_exceptions() when it opened
  };
  // `stream`: where the caller runs its kernels on the scope's views; the
  // default is the calling thread's (Note [The stream a scope serves]).
  Scope forward(Unit unit, Stream stream = {});
  Scope backward(Unit unit, bool sync = true, Stream stream = {});
  // Starts gathering a unit's parameters (and those it uses of earlier
  // units) ahead of its scope (on CUDA on the communication stream,
  // overlapping the compute); its scope then finds them gathered.
  void prefetch(Unit unit);

  // Collective: one AdamW step at `lr` on every unit's zero1 shard, from the
  // gradients the backward scopes synced since the last step (Note
  // [ZeroModule steps on synced gradients]). InvalidState when no unit
  // synced, or a unit holds gradients of backward(unit, sync=false) scopes
  // that no later sync reduced: the step would apply weight decay alone;
  // the same when a unit holds gradients of its parameters used by later
  // units (Note [Parameters tied across units]) that no sync of its own
  // reduced. A unit with no synced backward since the last step steps on a
  // zero gradient. In f16 the gradients carry loss_scale(), which the step takes out.
  // `before_update`, when given, runs once the gradient statistics are read
  // and before anything is updated (ZeroAdamW::step); what it throws ends
  // the step with nothing changed: the synced gradients stay, for another
  // step() or discard_gradients(), as after a refused lr. It must decide
  // alike on every rank, from values the ranks agree on (the engine
  // all-gathers its token-id flags first): a veto on some ranks only leaves
  // the others' shards updated, a model of two steps. The units of `gather_after_update` are
  // prefetched for the next step as soon as their update is issued (Note
  // [Gathers after the update]).
  StepResult step(double lr, const std::function<void()>& before_update = {},
                  std::span<const Unit> gather_after_update = {});
  // Drops every gradient accumulated or reduced since the last step (a step
  // whose update is withheld): the next backward scopes start a step afresh,
  // also the scopes of units that use parameters of earlier units. Every
  // unit must be idle (no scope open).
  void discard_gradients();
  // The factor to multiply the loss by before backward: 1 unless f16.
  double loss_scale() const { return scaler_ ? scaler_->scale() : 1.0; }
  // Collective: every parameter, fp32 on cpu, by its name ("unit.name" or the
  // module path's).
  std::map<std::string, Tensor> full_params();

  // By-name lookup outside a scope. A parameter's name is the one
  // full_params() and checkpoints use ("unit.name" or its module path's);
  // a tied second name finds the parameter it shares.
  struct ParamLocation {
    Unit unit;
    std::size_t index;  // in handle(unit): its fqn(index), shape, shards
  };
  std::optional<ParamLocation> find_param(
      const std::string& name) const;  // nullopt: no unit has it
  // A name of one unit tied to an earlier unit's parameter (Note
  // [Parameters tied across units]).
  struct TiedParam {
    Unit user;
    std::string fqn;  // the user's name
    ParamLocation owner;
  };
  std::vector<TiedParam> tied_params() const;
  // Earlier units' parameters add_unit compared with new ones to find ties:
  // only those that share a storage with one, so adding units stays linear
  // in their number (a test holds it to that).
  std::size_t tie_candidates_checked() const { return tie_candidates_checked_; }
  // Views of parameter `name` of unit `unit` ("name" or "unit.name", own or
  // tied) that stay valid across reshards, for layers that bind once: the
  // unsharded parameter and the gradient the unit's backward scopes hand
  // out (Scope::param and Scope::grad, whose memory exists only in scope).
  struct ParamViews {
    Tensor param, grad;
  };
  ParamViews param_views(Unit unit, const std::string& name) const;
  // Collective over the unit's groups: one parameter, fp32 on cpu, by name.
  // InvalidArgument (on every rank, before any collective) when no unit has it.
  Tensor full_param(const std::string& name);

  FlatParamHandle& handle(Unit unit) const;
  // The unit add_unit returned `index`-th (from 0); InvalidArgument past the last.
  Unit unit(std::size_t index) const;
  const std::vector<std::unique_ptr<FlatParamHandle>>& handles() const { return handles_; }
  const CommPtr& world() const { return world_; }
  const ZeroModuleOptions& options() const { return options_; }
  const AllocatorPtr& allocator() const { return allocator_; }
  Stream stream() const { return compute_stream_ ? compute_stream_->get() : Stream(); }  // compute
  Stream comm_stream() const { return comm_stream_ ? comm_stream_->get() : stream(); }
  // Blocks until the work issued to the module's streams has run; throws a
  // failure raised there.
  void synchronize() const;
  // Blocks until the work issued to `stream` so far has run, through a
  // CommWatchdog over the module's groups (Note [Comm watchdog]): when a
  // collective that work holds or waits for does not finish within their
  // timeout, the groups are aborted and CommError names the collective.
  // `what` names the wait in that message. Every host wait of the module's
  // streams goes through here.
  void synchronize(Stream stream, const char* what) const;
  // The same for the work `event` captured.
  void wait(const Event& event, const char* what) const;
  // The compute stream waits for every unit's issued gradient reduction
  // (step() does this first; call it before to see the wait apart).
  void wait_for_reduced_grads();
  // Note [Checkpoints wait for the save in flight]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // A BackgroundCheckpointSaver writes while training goes on. A load made
  // meanwhile read the checkpoint before the one being written (its
  // `latest` had not moved yet), and a synchronous save made meanwhile wrote
  // beside the saver's thread into the same directory (its `latest` and its
  // pruning): both without a word. So the saver registers here, for its
  // lifetime, how to wait for its save in flight, and load_checkpoint and
  // save_checkpoint wait for it first (throwing that save's CheckpointError,
  // alike on every rank, when it failed). One saver per module:
  // InvalidArgument for a second while the first lives.
  void set_background_save_wait(std::function<void()> wait);  // empty: the saver is gone
  // `call` ("load_checkpoint") prefixes a failed save's CheckpointError.
  void wait_for_background_save(const char* call);
  // Expired once the module is destroyed: what a helper that may outlive it watches.
  std::weak_ptr<const bool> lifetime() const { return alive_; }
  MemoryStats memory_stats() const { return allocator_->stats(); }
  // True while step() runs, its before_update included, and while the
  // optimizer steps on its own (optimizer().step(), its callbacks
  // included): step(), discard_gradients() and load_checkpoint() refuse to
  // run then (Note [No step inside a step]).
  bool stepping() const { return stepping_ || (optimizer_ && optimizer_->stepping()); }
  // The optimizer over every unit (made on first use; no unit can be added after).
  // Step through step(), which also ends the module's step (its record of
  // which units synced); after an optimizer().step() of its own, a caller
  // calls discard_gradients() before the next backward scopes.
  ZeroAdamW& optimizer();
  DynamicLossScaler* loss_scaler() { return scaler_.get(); }  // f16 only, else null

 private:
  // Declared first, destroyed last: handles and tensors keep device memory
  // alive. Null: the calling thread's stream (Note [Streams of a CPU module]).
  std::unique_ptr<OwnedStream> compute_stream_, comm_stream_;
  CommPtr world_;
  // Over the module's groups (Note [Comm watchdog]).
  CommWatchdog watchdog() const;
  ZeroModuleOptions options_;
  AllocatorPtr allocator_;
  struct SeenParam {  // an earlier unit's parameter, to find ties across units
    std::weak_ptr<Storage> storage;
    std::size_t begin, end;  // bytes of the storage
    DType dtype;
    Shape shape;
    std::string fqn;
    ParamLocation at;
    std::uint64_t digest;  // of its values when added (0: none read); a tie must still hold them
  };
  std::vector<SeenParam> seen_params_;
  // seen_params_'s indices by storage, in order: a unit's tie lookup reads
  // only the parameters that share a storage with its own, so adding units
  // is linear in their number.
  std::unordered_map<const Storage*, std::vector<std::size_t>> seen_by_storage_;
  std::size_t tie_candidates_checked_ = 0;
  // Every unit's name and every parameter's full name so far (tied names
  // too): a second of either would make find_param and full_params pick one.
  std::unordered_set<std::string> unit_names_, param_names_;
  // Collective: InvalidArgument on every rank when a value is not finite, the
  // ranks' values differ (Note [Initial values agree across ranks]), or a
  // rank refused the unit itself (`refusal`, its message: a repeated name, a
  // changed tie; empty: none), in that rank's words.
  // `digests`: each of `params`' values as given (values_digest).
  void check_initial_values(const std::string& unit, const std::vector<NamedParam>& params,
                            const std::vector<std::uint64_t>& digests, const std::string& refusal);
  // `unit`'s index; InvalidArgument naming `call` when another module made
  // it, or no module did (Note [A unit belongs to its module]).
  std::size_t index_of(const Unit& unit, const char* call) const;
  Unit unit_at(std::size_t index) const { return Unit(index, alive_); }
  FlatParamHandle& handle_at(std::size_t index) const { return *handles_[index]; }
  ParamViews param_views_at(std::size_t unit, const std::string& name) const;
  void prefetch_at(std::size_t unit);
  // InvalidState naming `call` and the first unit with a scope open.
  void expect_scopes_closed(const char* call) const;
  struct Tie {  // Note [Parameters tied across units]
    TiedParam param;
    Tensor grad;  // compute dtype, the parameter's shape; memory only in the user's backward scope
  };
  std::vector<Tie> ties_;
  const Tie* find_tie(std::size_t user,
                      const std::string& name) const;  // "name" or "unit.name"; null: none
  // A user's scope: unshard the owners it needs (those it opened go to
  // `opened`); in backward also check the order and give the tie gradients memory.
  // `open`: the owners found open, recorded in users_inside_.
  void open_ties(std::size_t user, bool backward, std::vector<std::size_t>* opened,
                 std::vector<std::pair<std::size_t, std::uint64_t>>* open);
  // A user's scope that found `owner` open in hold `hold` closes.
  void leave_owner(std::size_t user, std::size_t owner, std::uint64_t hold);
  // `owner`'s hold ends (`what` closes it: its own scope, or a user's that
  // opened it): InvalidState naming the user scopes still open inside it.
  void end_hold(std::size_t owner, const std::string& what);
  // A user's backward scope ends: its tie gradients go to their owners.
  void add_tie_grads(std::size_t user);
  // "'head', 'lm'": the units that use parameters of `owner`; empty: none.
  std::string tie_users(std::size_t owner) const;
  AllocatorPtr
      dry_host_memory_;  // a dry run's host stand-ins (parameter copies, offloaded gradients)
  const AllocatorPtr& dry_host_allocator() const { return dry_host_memory_; }
  std::unique_ptr<StrategyPlan> plan_;
  std::vector<std::unique_ptr<FlatParamHandle>> handles_;
  std::unique_ptr<ZeroAdamW> optimizer_;
  std::unique_ptr<DynamicLossScaler> scaler_;  // f16 only
  bool synced_since_step_ = false;             // a backward scope synced since the last step
  bool stepping_ = false;                      // step() runs (Note [No step inside a step])
  std::vector<int>
      unsynced_;              // per unit: backward scopes since its last sync that only accumulated
  std::vector<bool> synced_;  // per unit: a backward scope of it synced since the last step
  // Per unit: a backward scope of it failed or ended by an exception since
  // the last step (Note [A failed backward skips the step]).
  std::vector<bool> failed_;
  std::vector<int> tie_grads_;  // per unit: tie gradients added to it since its last sync
  // Per unit: while it is open (a hold: its own scope, or the scope of a
  // user that opened it), the user scopes that opened inside and found it
  // open, which must close first (Note [Parameters tied across units]).
  struct UsersInside {
    std::vector<std::size_t> users;  // their units
    std::uint64_t hold = 0;          // counts the holds ended
  };
  std::vector<UsersInside> users_inside_;
  // Held by the module alone; its scopes watch it (Note [A scope outlives no module]).
  std::shared_ptr<const bool> alive_ = std::make_shared<const bool>(true);
  std::function<void()> background_save_wait_;  // Note [Checkpoints wait for the save in flight]
};

}  // namespace zrt::optim
