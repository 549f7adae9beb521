// FlatParamHandle: one wrap unit's parameters as a FlatParameter, its fp32
// zero1 shard (the optimizer's master copy) paired with a low-precision zero3
// shard, and the unshard / reshard / gradient path of one training step.
//
// Note [Zero1 and zero3 shards]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The zero1 shard (fp32) is sharded over the zero1 group; the optimizer
// updates it. The first unshard after an update casts it to the compute dtype
// and all-gathers over the zero1 group; the reshard that follows keeps this
// rank's zero3 slice (compute dtype) of the gathered parameter, so later
// unshards in the same step (backward, the next micro-batch) all-gather only
// over the smaller zero3 group. With zero3 = zero1 = world this is classic
// ZeRO-3 / FSDP FULL_SHARD; with a zero3 group of one node it is LayerZero.
// When the two groups are one and the compute dtype is fp32, this rank's
// zero3 slice holds exactly its zero1 shard's values, so the zero3 shard is
// the zero1 shard itself: no copy at the reshard, no second buffer. (The
// optimizer changes the zero1 shard only together with mark_params_updated,
// after which the next unshard gathers from zero1 anyway.) The two slices
// coincide whenever the groups have one size and this rank one position in
// both, so a layer-zero world whose zero3 group is the whole world counts too.
//
// Note [Unsharded parameter of a world of one]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With a zero1 group of one rank (one process, or no-shard) the gathers and
// the reduce-scatter are copies of the whole flat parameter: three per step.
// The reduce-scatter is dropped in every dtype: the fp32 gradient's memory
// becomes the zero1 gradient (Storage::adopt_memory), whatever the compute
// and reduce dtypes, as a reduction over one rank is the identity, for sum
// and avg alike, and nothing is cast down to the reduce dtype (no-shard's
// replica all-reduce still runs, in fp32). The gathers are dropped in fp32
// with the master on the device (Note [Master in host memory]): the
// unsharded parameter borrows the zero1 shard's memory
// (Storage::borrow_memory) instead of gathering it; resharding lets go of
// it, so freeing it stays what it always is. The layers only read the
// parameter, and the optimizer writes the zero1 shard between steps, when
// nothing is unsharded or the next unshard would gather it anyway.
//
// Note [Gradient path]
// ~~~~~~~~~~~~~~~~~~~~
// pre_backward gives the unit an unsharded runtime gradient (compute dtype,
// zeroed) whose per-parameter views the layers accumulate into. post_backward
// adds it into the fp32 unsharded gradient (allocated on first use, reloaded
// from pinned host memory when offloaded) and frees it. Micro-batches keep
// accumulating with no communication. On the last micro-batch (sync_grads)
// the fp32 gradient is reduce-scattered over the zero1 group into the zero1
// gradient shard (optionally in a lower reduce dtype), all-reduced across
// replica groups (hybrid sharding, and no-shard, whose replicas are the
// whole world), and freed. A use of one of the unit's parameters in another
// unit adds its gradient into the fp32 gradient too (add_to_grad, Note
// [Parameters tied across units] in zero_module.h), before this unit's
// post_backward adds onto it.
//
// Note [Quantized gradient reduce-scatter]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With grad_reduce.dtype = int8 (zrt-train --reduce-dtype int8, ZeRO++'s
// qgZ) the fp32 gradient is quantized in its zero1 chunks (Note [Blockwise
// int8 quantization]), chunk r going to rank r in one all_to_all, and each
// rank dequantizes the chunks it received and adds them in rank order in
// fp32 (dequantize_sum), dividing once for avg. int4 is the same with 4-bit
// values in blocks of 64 (Note [Blockwise int4 quantization]): each zero1
// chunk is packed on its own in whole bytes, so chunk r is still a
// contiguous 1/W of the buffer; the scale max|x| / 7 widens the bound below
// (at most 18x int8's; measured 14-18% relative error a rank on
// heavy-tailed values against int8's 1-2%, about 10x), for 0.5625 bytes an element. A ring reduce-scatter
// in int8 would requantize partial sums at every hop; here every rank's
// gradient is quantized once and no rank sums quantized values twice, so
// the error of an element is at most the sum over ranks of half their
// block's scale. The exchange moves 1.016 bytes an element (W - 1 chunks
// out and in), against 4 (fp32) or 2 (bf16). Replica all-reduces (hybrid)
// stay fp32, and a zero1 group of one reduces nothing: there int8 and int4
// are fp32.
//
// Note [Master in host memory]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With master_on_host (--offload-optimizer host) the fp32 zero1 shard comes
// from host_allocator (pinned on CUDA), and so do the optimizer's m and v
// (ZeroAdamW allocates them beside the master) and a host copy of the
// reduced gradient shard: 16 bytes per parameter of a shard leave the
// device, which keeps the compute-dtype zero3 shard and the fp32 gradient
// shard it reduces into. Three copies connect the two sides, all in stream
// order and asynchronous on pinned memory (Tensor::copy_async_):
//   - reduce_grads copies the reduced gradient shard down on the
//     communication stream (in a world of one too, after the compute
//     stream's work, which then goes on), before `reduced_` is recorded,
//     so the optimizer's waits (wait_for_reduced_grads, then the host read
//     of the gradient statistics) cover it;
//   - the optimizer runs on the host (master_stream()): zrt's CPU AdamW on
//     the pinned master, m, v and gradient copy, while the device is free;
//   - the first unshard after an update casts the master to the compute
//     dtype on the host, into a pinned staging shard, and copies it up on
//     the communication stream before the gather: per unit, so with
//     prefetch the upload of the next units overlaps this unit's compute.
// The device gradient shard stays so that the gradient statistics (norm,
// non-finite flag) are computed and reduced where the collectives run. The
// master and the device buffers are different memory, so the zero3 shard and
// the unsharded parameter of a world of one never alias the master (Note
// [Zero1 and zero3 shards], Note [Unsharded parameter of a world of one]).
// On a CPU device the host and the device are one memory: the same path
// runs (the tests use it so), and the state only leaves the caching
// allocator.
//
// Note [Unshard on the communication stream]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// unshard() may run ahead of compute (prefetch): its all-gather is issued on
// comm_stream after an event makes that stream wait for the work issued to
// the compute stream so far (the zero1 shard the optimizer wrote, earlier
// readers of recycled memory). pre_forward / pre_backward make the compute
// stream wait for the gather's event before the layers read the parameters.
// The unsharded buffer, allocated on the compute stream, is declared used on
// comm_stream (Allocator::record_use), so its memory is not recycled before
// the gather is done; reshard waits for the gather too before it copies the
// zero3 slice out of it. Gradient reductions run on comm_stream as well, so
// the backward of the next unit overlaps them: comm_stream waits for the
// compute issued so far, the fp32 gradient is declared used there, and the
// optimizer waits for the reduction (wait_for_reduced_grads) before it
// reads the zero1 gradient. A rank's gathers and reductions all go to
// comm_stream, so they run in one order, the one they were issued in, on
// every rank, also when they belong to different groups (layer-zero's zero3
// gathers and world reductions), which concurrent communicators would not
// guarantee. The step's collectives on the compute stream (the gradient
// statistics, the engine's loss sums) are issued after it waited for the
// reductions (wait_for_reduced_grads).
// The same holds on the CPU with a communication stream of its own (Note
// [Streams of a CPU module]); with none, comm_stream is the compute stream
// and the events are not needed.
//
// Note [Quantized parameter gather]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With gather.dtype = int8 (zrt-train --gather-dtype int8, ZeRO++'s qwZ) the
// parameter's all-gathers move int8 values and fp32 block scales (Note
// [Blockwise int8 quantization] in kernels/ops/quantize_math.h): 1.016 bytes
// an element, against 2 in bf16 and 4 in fp32. The first unshard after an
// update quantizes this rank's fp32 master straight (no compute-dtype cast
// first) as one chunk, all-gathers the chunks over zero1, dequantizes them
// into the unsharded parameter in the compute dtype, and keeps this rank's
// zero3 slice of the gathered bytes as its zero3 shard, on the
// communication stream. Later unshards in the step gather those bytes over
// zero3 and dequantize them: the same bytes, so every unshard of a step sees
// the same values, which differ from the master by at most half a block's
// scale. The zero3 shard stays quantized (about half a bf16 shard). The
// fp32 master, the gradients, the optimizer, full parameters
// (summon_full_params) and checkpoints are untouched, so the quantization
// error does not accumulate across steps and a checkpoint resumes under
// either setting. Blocks restart at each zero1 chunk, so the values depend
// on the zero1 size, as a reduction's order does. A zero1 group of one
// gathers nothing: there the setting changes nothing (a world of one,
// no-shard).
//
// Note [Views live in their scopes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// param(i) and grad(i), the views a caller's layers bind to, are slices of a
// storage of their own that borrows the unsharded parameter (and, in a
// backward, the runtime gradient) only between pre_forward / pre_backward
// and the matching post_forward / post_backward, and is freed otherwise. A
// view used outside those scopes is refused (Note [Freed storage]) whether
// or not the unit is gathered then: a prefetch, a strategy that keeps the
// parameter (grad-op, no-shard) or a micro-batch's kept gradient would
// otherwise let a layer of another unit read it, so a model that broke the
// contract ran under one setting and failed under another, and read a
// parameter whose gradient no one adds. The handle's own buffers
// (full_param_padded and the like) are what it gathers, reduces and frees;
// the borrowing costs no memory and no copy.
//
// Note [Flat parameters belong to the optimizer]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The handle casts, accumulates and flattens with zrt's kernels, so it sits
// above them, in zrt::optim, with the AdamW step over its zero1 shards and
// ZeroModule: the ZeRO optimizer owns its sharded parameters, as DeepSpeed's
// ZeRO-3 optimizer owns its partitions. zrt::runtime (tensors, memory,
// communicators and the ZeroGroups a handle talks to) includes no kernel.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zrt/optim/flat_param/flat_param_layout.h"
#include "zrt/optim/flat_param/sharding_strategy.h"
#include "zrt/runtime/comm/communicator.h"
#include "zrt/runtime/comm/zero_groups.h"
#include "zrt/runtime/tensor.h"

namespace zrt::optim {

enum class HandleState {
  idle,
  forward,
  backward_pre,
  backward_post,
  summon_full_params,
  sync_params
};
const char* handle_state_name(HandleState s);

// One original parameter: the module it belongs to, its name there, and its
// initial value. The same tensor under two names is a tied parameter.
struct NamedParam {
  std::string module_path;  // "" for the root module
  std::string name;
  Tensor tensor;
  std::int64_t pad_rows = 0;  // zero rows after it (Note [Padded rows of a parameter])
  // When set, the initial value is drawn where the shard lives instead of
  // read from `tensor` (which then gives only the shape and the identity of
  // ties, and may be unbacked): init(dst, first, stream) fills dst (f32)
  // with elements first, first + 1, ... of the flattened parameter, on
  // dst's device in stream order (Note [Sharded initialisation]).
  std::function<void(const Tensor& dst, std::int64_t first, Stream stream)> init = nullptr;
  std::string fqn() const { return module_path.empty() ? name : module_path + "." + name; }
};

// Two names of one tensor (a tie): the same memory, offset, shape and dtype.
// A view of part of a tensor is a parameter of its own, with values of its own.
bool same_tensor(const Tensor& a, const Tensor& b);

// What a gradient reduce-scatter moves: the fp32 gradient cast to f32, bf16
// or f16, or quantized to int8 or int4 (Note [Quantized gradient reduce-scatter]).
enum class ReduceDType : std::uint8_t { f32, bf16, f16, int8, int4 };
const char* reduce_dtype_name(ReduceDType t);

// How a flat parameter's gradient is synchronised across ranks. Declared
// here, where it acts; ZeroModuleOptions holds it whole (Note [Options owned
// by their layer]).
struct GradReduceOptions {
  ReduceDType dtype = ReduceDType::f32;  // what the reduce-scatter moves
  ReduceOp op = ReduceOp::avg;           // sum or avg over ranks
  bool offload = false;                  // fp32 gradients in host memory between micro-batches
};
// InvalidArgument naming `owner` and the bad field.
void check_grad_reduce_options(const GradReduceOptions& o, const std::string& owner);

// How a flat parameter's all-gathers carry it (Note [Quantized parameter
// gather]). Declared here, where it acts; ZeroModuleOptions holds it whole.
enum class GatherDType : std::uint8_t {
  compute,  // the compute dtype itself
  int8,     // blockwise int8 values with fp32 scales
};
const char* gather_dtype_name(GatherDType t);
struct ParamGatherOptions {
  GatherDType dtype = GatherDType::compute;
};

struct FlatParamOptions {
  std::string name = "flat_param";     // in messages, e.g. "h.3"
  DType param_dtype = DType::f32;      // forward/backward dtype
  GradReduceOptions grad_reduce{};     // dtype, op and host offload of the gradient
  ParamGatherOptions gather{};         // what the parameter all-gathers move
  bool reshard_after_forward = true;   // false keeps the param for backward (SHARD_GRAD_OP)
  bool reshard_after_backward = true;  // false keeps it replicated (NO_SHARD)
  bool master_on_host =
      false;  // fp32 master (and its gradient copy) in host memory (Note [Master in host memory])
  Device device = Device::cpu();
  AllocatorPtr allocator{};       // device memory; null = default_allocator(device)
  AllocatorPtr host_allocator{};  // host memory for offload; null = pinned (cuda) or plain host
  Stream stream{};                // compute: kernels and copies
  Stream comm_stream{};           // collectives; the default Stream{}: `stream`
};

class FlatParamHandle {
 public:
  // Flattens `params` (module order; tied duplicates recognised by identical
  // storage, offset and shape), validates across the zero1 group, shards.
  // Every rank of groups.zero1 must construct its handles in the same order.
  FlatParamHandle(std::vector<NamedParam> params, ZeroGroups groups, FlatParamOptions options);
  ~FlatParamHandle();
  FlatParamHandle(const FlatParamHandle&) = delete;
  FlatParamHandle& operator=(const FlatParamHandle&) = delete;

  // --- metadata -----------------------------------------------------------
  const std::string& name() const { return options_.name; }
  const FlatParamOptions& options() const { return options_; }
  const FlatParamLayout& layout() const { return layout_; }
  const ZeroGroups& groups() const { return groups_; }
  std::size_t num_params() const { return layout_.num_params(); }
  const std::string& fqn(std::size_t i) const { return layout_.params()[i].fqn; }
  const std::vector<SharedParamSpec>& shared_params() const { return shared_; }
  // Index of a parameter by any of its names (tied names resolve to the primary);
  // InvalidArgument naming it when there is none.
  std::size_t index_of(const std::string& fqn) const;
  std::optional<std::size_t> find(const std::string& fqn) const;  // nullopt: none
  const std::vector<ShardParamInfo>& zero1_shard_infos() const { return zero1_infos_; }
  const std::vector<ShardParamInfo>& zero3_shard_infos() const { return zero3_infos_; }
  HandleState state() const { return state_; }

  // --- sharded state (always allocated) ------------------------------------
  const Tensor& zero1_shard() const {
    return zero1_shard_;
  }  // fp32 master (host with master_on_host)
  const Tensor& zero1_grad() const { return zero1_grad_; }  // fp32 gradient shard, on the device
  // The gradient shard the optimizer reads beside the master: zero1_grad(),
  // or with master_on_host its host copy (Note [Master in host memory]).
  const Tensor& master_grad() const {
    return options_.master_on_host ? host_zero1_grad_ : zero1_grad_;
  }
  // Where the master is read and written in order: the compute stream, or
  // with the master in host memory beside a CUDA device, the host (the
  // default CPU stream, which runs kernels on the calling thread).
  Stream master_stream() const {
    return options_.master_on_host && options_.device.is_cuda() ? Stream::cpu() : options_.stream;
  }
  // Compute dtype, or with a quantized gather this rank's quantized zero1
  // chunks of the zero3 slice (u8; Note [Quantized parameter gather]).
  const Tensor& zero3_shard() const { return zero3_shard_; }
  // The gathers move quantized chunks (gather.dtype int8 over a zero1 group of several).
  bool gathers_quantized() const { return gathers_quantized_; }
  // The gradient reduce-scatter moves quantized chunks (grad_reduce.dtype int8 or int4, the same).
  bool reduces_quantized() const { return reduces_quantized_; }
  // Bytes one rank contributes to a gather over zero1 (what each gather
  // moves per rank of the group): a quantized chunk, or the compute dtype's.
  std::int64_t gather_chunk_bytes() const;
  // Parameter i's flattened slice of the zero1 shard / gradient shard (size 0
  // when this rank holds none of it): per-parameter optimizer options.
  Tensor sharded_param(std::size_t i) const;
  Tensor sharded_grad(std::size_t i) const;

  // --- unsharded views (data access throws outside the unit's scopes) ------
  // Compute dtype, the padded shape (the original one unless it has padded
  // rows: Note [Padded rows of a parameter]). Memory only between
  // pre_forward or pre_backward and its post (Note [Views live in their scopes]).
  Tensor param(std::size_t i) const;
  Tensor grad(std::size_t i) const;  // runtime gradient, compute dtype, padded shape; backward only
  const Tensor& full_param_padded() const { return full_param_; }
  const Tensor& full_grad_padded() const { return full_grad_; }
  const Tensor& full_prec_grad_padded() const { return full_prec_grad_; }
  bool is_unsharded() const { return !full_param_.is_freed(); }
  // Note [Unsharded parameter of a world of one]: the unsharded parameter is
  // the zero1 shard's memory, so it costs no bytes of its own.
  bool unsharded_is_master() const { return unsharded_is_master_; }

  // --- one step -----------------------------------------------------------
  void pre_forward();                   // idle -> forward: unshard
  void post_forward();                  // forward -> idle: reshard (free unless kept for backward)
  void pre_backward();                  // idle -> backward_pre: unshard, zeroed runtime grad
  void post_backward(bool sync_grads);  // -> backward_post -> idle; see Note [Gradient path]
  // Lower-level steps for engines that schedule (e.g. prefetch) themselves.
  void unshard();
  void reshard(bool free_unsharded);
  // After the optimizer updated the zero1 shard: the next unshard gathers it.
  // Makes the compute stream wait for the gradient reduction issued on the
  // communication stream (before the optimizer reads zero1_grad()).
  void wait_for_reduced_grads() const {
    if (comm_stream() != options_.stream) reduced_.wait(options_.stream);
  }
  // An unsharded parameter kept past its scopes (NO_SHARD's) that is not
  // the master's own memory holds the values before the update: it is
  // freed, so that a view read before the next unshard is refused, never
  // stale (Note [Freed storage]).
  void mark_params_updated() {
    needs_param_sync_ = true;
    unsharded_current_ = false;
    if (!unsharded_is_master_) free_storage(full_param_);
  }
  bool needs_param_sync() const { return needs_param_sync_; }
  // Clears accumulated gradients (fp32 unsharded, offloaded copy, zero1 grad).
  void zero_grad();
  // Undoes pre_backward for a backward that never ran (its scope failed to
  // open): idle again, the fresh compute-dtype gradient dropped, resharded.
  void cancel_backward();
  // Fills the zero1 gradient shard with NaN, after the reductions in flight:
  // the next step's statistics find it non-finite (Note [A failed backward
  // skips the step] in zero_module.cpp).
  void poison_grad();
  // Adds `grad` (parameter i's padded shape or numel; f32, bf16 or f16, on the
  // device) into the fp32 unsharded gradient, allocating it (zeroed, or
  // reloaded when offloaded) if this step has none yet: a use of the
  // parameter outside this unit (Note [Parameters tied across units] in
  // zero_module.h). The next post_backward accumulates onto it and a sync
  // reduces the sum; with offload_grads, outside this unit's own backward
  // the sum goes back to host memory at once. Idle, or inside a forward or
  // before post_backward.
  void add_to_grad(std::size_t i, const Tensor& grad);

  // --- whole parameters -----------------------------------------------------
  // Collective over zero1: every original parameter in fp32, original shapes.
  std::vector<Tensor> summon_full_params();
  // Collective over zero1: the same values, gathered at most `budget`
  // elements at a time (the same part of every rank's shard, one element at
  // least), so that no rank holds the unit whole (Note [Streamed saving]):
  // `sink` gets every piece of every parameter on every rank as (parameter
  // index, its first element, count, fp32 host data valid during the call).
  using ParamPieceSink = std::function<void(std::size_t, std::int64_t, std::int64_t, const float*)>;
  void gather_full_params(const ParamPieceSink& sink, std::int64_t budget);
  // The parameters whose elements in this rank's zero1 shard hold NaN or
  // Inf. No communication.
  std::vector<std::size_t> non_finite_params();
  // Sets every original parameter from full values (any dtype; same shapes);
  // each rank keeps its zero1 slice. No communication.
  void load_full_params(const std::vector<Tensor>& values);

 private:
  static FlatParamLayout checked_layout(const std::vector<NamedParam>& params,
                                        const ZeroGroups& groups, const FlatParamOptions& options,
                                        std::vector<SharedParamSpec>* shared);
  void expect_state(HandleState expected, const char* call) const;
  // The fp32 unsharded gradient to pinned host memory (offload_grads), freed on the device.
  void offload_grad();
  void validate_across_ranks() const;
  Tensor new_buffer(std::int64_t numel, DType dtype, bool freed, Stream stream) const;
  Tensor new_buffer(std::int64_t numel, DType dtype, bool freed) const {
    return new_buffer(numel, dtype, freed, options_.stream);
  }
  // Host memory from host_allocator (pinned on CUDA), allocated now.
  Tensor host_buffer(std::int64_t numel, DType dtype, const std::string& name) const;
  // The master's n1 elements on the device in `dtype`, in `stream`'s order:
  // the master itself, or a cast, or with master_on_host an upload.
  Tensor master_on_device(DType dtype, Stream stream);
  // The master's n1 elements quantized (u8) on the device, in `stream`'s
  // order (Note [Quantized parameter gather]).
  Tensor quantized_master_on_device(Stream stream);
  // `host` (pinned) copied up into a new device buffer in `stream`'s order.
  Tensor upload(const Tensor& host, Stream stream);
  // The stream of a gather the host reads at once (summon_full_params,
  // gather_full_params): the compute stream, but for an owned CPU stream
  // (cpu_streams all), which is drained and left out: the gather runs on the
  // calling thread, so a collective that fails (ranks that disagree on it)
  // throws there and leaves the compute stream usable, not failed for every
  // later call. A dry run's discarding stream is kept.
  Stream host_read_gather_stream() const;
  // Names this flat parameter in its collectives' contracts while it lives.
  FlightRecorder::Subject gathers_subject() const;
  // unshard()'s all-gather in int8 (Note [Quantized parameter gather]).
  void gather_quantized(Stream comm);
  // Before the host writes the master or its staging beside a CUDA device:
  // the uploads that read them have run (Note [Master in host memory]).
  void wait_for_uploads() const;
  Stream comm_stream() const {
    return options_.comm_stream == Stream() ? options_.stream : options_.comm_stream;
  }
  void wait_unsharded() const {
    if (comm_stream() != options_.stream && !skip_gather_wait_) gathered_.wait(options_.stream);
  }
  // Note [Views live in their scopes]: the views get the unsharded
  // parameter (and with `grad`, the runtime gradient); close_views lets go.
  void open_views(bool grad);
  void close_views() noexcept;
  void accumulate_runtime_grad();
  void reduce_grads();
  // reduce_grads()'s reduce-scatter in int8 or int4 (Note [Quantized gradient reduce-scatter]).
  void reduce_scatter_quantized(Stream comm);

  FlatParamOptions options_;
  ZeroGroups groups_;
  std::vector<SharedParamSpec> shared_;  // filled while layout_ is built: declared first
  FlatParamLayout layout_;
  std::vector<ShardParamInfo> zero1_infos_, zero3_infos_;
  HandleState state_ = HandleState::idle;
  bool zero3_is_master_ = false;      // zero3_shard_ is zero1_shard_ (fp32, same slice)
  bool unsharded_is_master_ = false;  // full_param_ borrows zero1_shard_ (fp32, zero1 of one)
  bool grad_is_master_ = false;       // zero1_grad_ adopts full_prec_grad_ (zero1 group of one)
  bool gathers_quantized_ = false;    // Note [Quantized parameter gather]
  bool reduces_quantized_ = false;    // Note [Quantized gradient reduce-scatter]
  bool needs_param_sync_ = true;      // the zero3 shard is stale: gather from zero1
  bool unsharded_current_ = false;    // full_param_ holds the current parameters
  bool grad_offloaded_ = false;

  Tensor zero1_shard_, zero1_grad_, zero3_shard_;
  Tensor full_param_, full_grad_, full_prec_grad_;  // freed while not needed
  // What param(i) and grad(i) slice: borrowing full_param_ and full_grad_ in
  // scope only (Note [Views live in their scopes]).
  Tensor param_views_, grad_views_;
  Tensor host_grad_;        // pinned copy of full_prec_grad_ (offload)
  Tensor host_zero1_grad_;  // master_on_host: host copy of zero1_grad_
  // master_on_host, non-fp32: the master cast (or quantized) for upload.
  Tensor host_param_staging_;
  std::vector<std::weak_ptr<Storage>> claimed_;  // storages of the original parameters
  Event compute_ready_, gathered_, reduced_;     // Note [Unshard on the communication stream]
  Event uploaded_;  // master_on_host: the last upload of the master issued
  // ZRT_TEST_SKIP_GATHER_WAIT=1 drops the wait for the gather: a test-only
  // fault that shows Note [Poisoned memory] catches a missing wait.
  bool skip_gather_wait_ = false;
};

// Builds the layout's parameter list from named parameters: primaries in
// order plus the tied names. Exposed for tests.
std::vector<ParamSpec> flat_param_specs(const std::vector<NamedParam>& params,
                                        std::vector<SharedParamSpec>* shared,
                                        std::vector<std::size_t>* primary_of_input);

}  // namespace zrt::optim
