#include "zrt/optim/flat_param/flat_param_handle.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>

#include "zrt/kernels/ops/cast.h"
#include "zrt/kernels/ops/fill.h"
#include "zrt/kernels/ops/grad_accumulate.h"
#include "zrt/kernels/ops/norm.h"
#include "zrt/kernels/ops/quantize.h"
#include "zrt/kernels/ops/quantize_math.h"
#include "zrt/runtime/comm/comm_watchdog.h"
#include "zrt/runtime/comm/rank_agreement.h"
#include "zrt/runtime/memory/caching_allocator.h"

namespace zrt::optim {

const char* handle_state_name(HandleState s) {
  switch (s) {
    case HandleState::idle:
      return "IDLE";
    case HandleState::forward:
      return "FORWARD";
    case HandleState::backward_pre:
      return "BACKWARD_PRE";
    case HandleState::backward_post:
      return "BACKWARD_POST";
    case HandleState::summon_full_params:
      return "SUMMON_FULL_PARAMS";
    case HandleState::sync_params:
      return "SYNC_PARAMS";
  }
  return "?";
}

const char* reduce_dtype_name(ReduceDType t) {
  constexpr const char* kNames[] = {"f32", "bf16", "f16", "int8",
                                    "int4"};  // in ReduceDType's order
  const auto i = static_cast<std::size_t>(t);
  return i < std::size(kNames) ? kNames[i] : "?";
}

const char* gather_dtype_name(GatherDType t) {
  switch (t) {
    case GatherDType::compute:
      return "compute";
    case GatherDType::int8:
      return "int8";
  }
  return "?";
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.shares_storage(b) && a.offset() == b.offset() && a.dtype() == b.dtype() &&
         a.shape() == b.shape();
}

namespace {

void check_params(const std::vector<NamedParam>& params) {
  ZRT_CHECK_ARG(!params.empty(), "cannot build a flat parameter from an empty parameter list");
  const Tensor& first = params.front().tensor;
  for (const auto& p : params) {
    ZRT_CHECK_ARG(is_floating(p.tensor.dtype()), "parameter '", p.fqn(), "' has dtype ",
                  dtype_name(p.tensor.dtype()), "; flat parameters hold floating dtypes only");
    ZRT_CHECK_ARG(p.tensor.dtype() == first.dtype(),
                  "parameters of one flat parameter must share a dtype: '", params.front().fqn(),
                  "' is ", dtype_name(first.dtype()), " but '", p.fqn(), "' is ",
                  dtype_name(p.tensor.dtype()));
    ZRT_CHECK_ARG(p.tensor.device() == first.device(),
                  "parameters of one flat parameter must share a device: '", params.front().fqn(),
                  "' is on ", first.device().str(), " but '", p.fqn(), "' is on ",
                  p.tensor.device().str());
  }
}

// What the ranks of a zero1 group must agree on (Note [Ranks agree on their settings]).
Settings fingerprint(const FlatParamOptions& o, const FlatParamLayout& l, const ZeroGroups& g,
                     const std::vector<SharedParamSpec>& shared) {
  Settings s = {{"param_dtype", dtype_name(o.param_dtype)},
                {"reduce_dtype", reduce_dtype_name(o.grad_reduce.dtype)},
                {"gather_dtype", gather_dtype_name(o.gather.dtype)},
                {"zero1 group size", std::to_string(g.zero1->size())},
                {"zero3 group size", std::to_string(g.zero3->size())},
                {"replica group size", std::to_string(g.replica ? g.replica->size() : 0)},
                {"parameters", std::to_string(l.num_params())},
                {"padded elements", std::to_string(l.numel_padded())}};
  for (std::size_t i = 0; i < l.num_params(); ++i) {
    const auto& p = l.params()[i];
    s.emplace_back(detail::concat("parameter ", i),
                   detail::concat("'", p.fqn, "' ", shape_str(p.shape), " pad_rows=", p.pad_rows));
  }
  for (std::size_t i = 0; i < shared.size(); ++i)
    s.emplace_back(
        detail::concat("tie ", i),
        detail::concat("'", shared[i].fqn, "' -> '", l.params()[shared[i].prim_index].fqn, "'"));
  return s;
}

// The block grid of the handle's quantized collectives, 0 without one (Note
// [Quantization blocks within one parameter]); a zero1 group of one moves
// nothing. int4's blocks (kInt4Block) divide int8's, so one grid serves both.
std::int64_t quant_block_of(const FlatParamOptions& o, int zero1_size) {
  static_assert(kernels::kQuantBlock % kernels::kInt4Block == 0);
  const bool quantized = o.gather.dtype == GatherDType::int8 ||
                         o.grad_reduce.dtype == ReduceDType::int8 ||
                         o.grad_reduce.dtype == ReduceDType::int4;
  return quantized && zero1_size > 1 ? kernels::kQuantBlock : 0;
}

}  // namespace

FlatParamLayout FlatParamHandle::checked_layout(const std::vector<NamedParam>& params,
                                                const ZeroGroups& groups,
                                                const FlatParamOptions& options,
                                                std::vector<SharedParamSpec>* shared) {
  check_params(params);
  ZRT_CHECK_ARG(groups.zero1 && groups.zero3, "flat parameter '", options.name,
                "' needs zero1 and zero3 groups");
  ZRT_CHECK_ARG(groups.zero1->size() % groups.zero3->size() == 0, "flat parameter '", options.name,
                "': zero1 group size ", groups.zero1->size(),
                " is not a multiple of zero3 group size ", groups.zero3->size());
  return FlatParamLayout(flat_param_specs(params, shared, nullptr), options.param_dtype,
                         groups.zero1->size(), quant_block_of(options, groups.zero1->size()));
}

std::vector<ParamSpec> flat_param_specs(const std::vector<NamedParam>& params,
                                        std::vector<SharedParamSpec>* shared,
                                        std::vector<std::size_t>* primary_of_input) {
  std::vector<ParamSpec> specs;
  std::vector<std::size_t> input_of_spec;
  for (std::size_t i = 0; i < params.size(); ++i) {
    std::size_t prim = specs.size();
    for (std::size_t s = 0; s < specs.size(); ++s)
      if (same_tensor(params[input_of_spec[s]].tensor, params[i].tensor)) prim = s;
    if (prim == specs.size()) {
      specs.push_back({params[i].fqn(), params[i].tensor.shape(), params[i].pad_rows});
      input_of_spec.push_back(i);
    } else if (shared) {
      shared->push_back({params[i].fqn(), prim});
    }
    if (primary_of_input) primary_of_input->push_back(prim);
  }
  return specs;
}

void check_grad_reduce_options(const GradReduceOptions& o, const std::string& owner) {
  ZRT_CHECK_ARG(o.dtype == ReduceDType::f32 || o.dtype == ReduceDType::bf16 ||
                    o.dtype == ReduceDType::f16 || o.dtype == ReduceDType::int8 ||
                    o.dtype == ReduceDType::int4,
                owner, ": gradients reduce in f32, bf16, f16, int8 or int4, not code ",
                static_cast<int>(o.dtype));
  ZRT_CHECK_ARG(o.op == ReduceOp::sum || o.op == ReduceOp::avg, owner,
                ": gradients reduce with sum or avg, not ", reduce_op_name(o.op));
}

FlatParamHandle::FlatParamHandle(std::vector<NamedParam> params, ZeroGroups groups,
                                 FlatParamOptions options)
    : options_(std::move(options)),
      groups_(std::move(groups)),
      layout_(checked_layout(params, groups_, options_, &shared_)),
      compute_ready_(options_.device),
      gathered_(options_.device),
      reduced_(options_.device),
      uploaded_(options_.device),
      skip_gather_wait_([] {  // set and not empty, as every ZRT_* variable
        const char* env = std::getenv("ZRT_TEST_SKIP_GATHER_WAIT");
        return env != nullptr && *env != '\0';
      }()) {
  check_grad_reduce_options(options_.grad_reduce, "flat parameter '" + options_.name + "'");
  if (!options_.allocator) options_.allocator = default_allocator(options_.device);
  ZRT_CHECK_ARG(options_.allocator->device() == options_.device, "flat parameter '", options_.name,
                "': allocator is for ", options_.allocator->device().str(), ", not ",
                options_.device.str());
  if (!options_.host_allocator)  // offload copies from a device stream need pinned memory
    options_.host_allocator =
        options_.device.is_cuda() ? make_pinned_host_allocator() : default_allocator(Device::cpu());
  ZRT_CHECK_ARG(options_.host_allocator->device().is_cpu(), "flat parameter '", options_.name,
                "': host_allocator is for ", options_.host_allocator->device().str(),
                ", not host memory");
  ZRT_CHECK_ARG(
      !options_.device.is_cuda() || !(options_.grad_reduce.offload || options_.master_on_host) ||
          options_.host_allocator->page_locked(),
      "flat parameter '", options_.name, "': offloading to host memory from a CUDA device needs a ",
      "pinned host_allocator (null gives one)");
  for (const auto& p : params) {
    p.tensor.storage().claim(p.tensor.offset() * p.tensor.itemsize(), p.tensor.nbytes(), this,
                             options_.name, p.fqn());
    claimed_.push_back(p.tensor.storage_ptr());
  }

  validate_across_ranks();

  zero1_infos_ = layout_.shard_infos(groups_.zero1->rank(), groups_.zero1->size());
  zero3_infos_ = layout_.shard_infos(groups_.zero3->rank(), groups_.zero3->size());
  const std::int64_t n1 = layout_.shard_numel(groups_.zero1->size());
  const std::int64_t n3 = layout_.shard_numel(groups_.zero3->size());
  const std::int64_t total = layout_.numel_padded();

  // This rank's fp32 master slice, straight from the originals: the unsharded
  // flat parameter is never materialised at construction.
  // Note [Master in host memory]: with master_on_host the master is written on the host.
  zero1_shard_ = options_.master_on_host
                     ? host_buffer(n1, DType::f32, ".zero1_shard")
                     : new_buffer(n1, DType::f32, false).set_name(options_.name + ".zero1_shard");
  kernels::zero(zero1_shard_, master_stream());
  std::vector<std::size_t> primary_of_input;
  flat_param_specs(params, nullptr, &primary_of_input);
  std::vector<bool> done(layout_.num_params(), false);
  for (std::size_t in = 0; in < params.size(); ++in) {
    std::size_t i = primary_of_input[in];
    if (done[i]) continue;
    done[i] = true;
    const auto& info = zero1_infos_[i];
    if (!info.in_shard) continue;
    Tensor dst = zero1_shard_.slice(info.offset_in_shard, info.numel_in_shard);
    if (params[in].init) {  // drawn here, for this shard only (Note [Sharded initialisation])
      params[in].init(dst, info.intra_param_start, master_stream());
      continue;
    }
    Tensor src = params[in].tensor.flatten().slice(info.intra_param_start, info.numel_in_shard);
    dst.copy_(src, master_stream());
  }
  options_.stream.synchronize();  // the copies read the caller's tensors
  zero1_grad_ = new_buffer(n1, DType::f32, false).set_name(options_.name + ".zero1_grad");
  kernels::zero(zero1_grad_, options_.stream);
  // fp32 and the same slice: the zero3 shard is the zero1 shard (Note [Zero1 and zero3 shards]).
  // A master in host memory is never device memory (Note [Master in host memory]).
  const bool f32 = options_.param_dtype == DType::f32 && !options_.master_on_host;
  // Note [Quantized parameter gather]: a zero1 group of one gathers nothing.
  gathers_quantized_ = options_.gather.dtype == GatherDType::int8 && groups_.zero1->size() > 1;
  zero3_is_master_ = f32 && !gathers_quantized_ && groups_.zero3->size() == groups_.zero1->size() &&
                     groups_.zero3->rank() == groups_.zero1->rank();
  // Note [Unsharded parameter of a world of one]
  unsharded_is_master_ = f32 && groups_.zero1->size() == 1;
  // Note [Quantized gradient reduce-scatter]: a zero1 group of one reduces
  // nothing, so it casts nothing down either, whatever the reduce dtype (a
  // bf16 reduce over one rank rounded the gradient and moved no byte).
  const bool quantized_dtype = options_.grad_reduce.dtype == ReduceDType::int8 ||
                               options_.grad_reduce.dtype == ReduceDType::int4;
  reduces_quantized_ = quantized_dtype && groups_.zero1->size() > 1;
  grad_is_master_ = groups_.zero1->size() == 1;
  if (zero3_is_master_)
    zero3_shard_ = zero1_shard_;
  else  // with a quantized gather, this rank's zero1 chunks of its zero3 slice, quantized
    zero3_shard_ =
        (gathers_quantized_ ? new_buffer(n3 / n1 * gather_chunk_bytes(), DType::u8, false)
                            : new_buffer(n3, options_.param_dtype, false))
            .set_name(options_.name + ".zero3_shard");
  full_param_ =
      new_buffer(total, options_.param_dtype, true).set_name(options_.name + ".full_param");
  full_grad_ = new_buffer(total, options_.param_dtype, true).set_name(options_.name + ".full_grad");
  full_prec_grad_ = new_buffer(total, DType::f32, true).set_name(options_.name + ".full_prec_grad");
  param_views_ = new_buffer(total, options_.param_dtype, true);
  grad_views_ = new_buffer(total, options_.param_dtype, true);
  if (options_.grad_reduce.offload)
    host_grad_ = Tensor::from_storage(std::make_shared<Storage>(0, options_.host_allocator),
                                      {total}, DType::f32, 0, options_.name + ".host_grad");
  if (options_.master_on_host) {
    host_zero1_grad_ = host_buffer(n1, DType::f32, ".host_zero1_grad");
    kernels::zero(host_zero1_grad_, master_stream());
    if (gathers_quantized_)
      host_param_staging_ = host_buffer(gather_chunk_bytes(), DType::u8, ".host_param_staging");
    else if (options_.param_dtype != DType::f32)
      host_param_staging_ = host_buffer(n1, options_.param_dtype, ".host_param_staging");
  }
}

FlatParamHandle::~FlatParamHandle() {
  for (const auto& weak : claimed_)
    if (auto storage = weak.lock()) storage->release_claims(this);
  // Views of the unsharded parameter and gradient may outlive the handle
  // (a tensor the caller kept from a scope): their memory goes back now,
  // while the streams it was used on exist (Note [A scope outlives no module]).
  close_views();
  free_storage(full_param_);
  free_storage(full_grad_);
}

Tensor FlatParamHandle::new_buffer(std::int64_t numel, DType dtype, bool freed,
                                   Stream stream) const {
  auto storage = std::make_shared<Storage>(
      freed ? 0 : static_cast<std::size_t>(numel) * dtype_size(dtype), options_.allocator, stream);
  return Tensor::from_storage(std::move(storage), {numel}, dtype);
}

Tensor FlatParamHandle::host_buffer(std::int64_t numel, DType dtype,
                                    const std::string& name) const {
  auto storage = std::make_shared<Storage>(static_cast<std::size_t>(numel) * dtype_size(dtype),
                                           options_.host_allocator, options_.stream);
  return Tensor::from_storage(std::move(storage), {numel}, dtype, 0, options_.name + name);
}

Tensor FlatParamHandle::master_on_device(DType dtype, Stream stream) {
  if (!options_.master_on_host) {
    if (dtype == DType::f32) return zero1_shard_;
    Tensor cast = new_buffer(zero1_shard_.numel(), dtype, false, stream);
    kernels::cast(cast, zero1_shard_, stream);
    return cast;
  }
  // Note [Master in host memory]: cast on the host (in `stream`'s order on a
  // CPU device, now beside a CUDA one), then upload from pinned memory.
  if (dtype == DType::f32) return upload(zero1_shard_, stream);
  ZRT_CHECK_STATE(dtype == options_.param_dtype && !gathers_quantized_, "flat parameter '",
                  options_.name, "': the master is staged for ", "upload in ",
                  gathers_quantized_ ? "int8" : dtype_name(options_.param_dtype), ", not ",
                  dtype_name(dtype));
  wait_for_uploads();  // an earlier upload may still read the staging
  kernels::cast(host_param_staging_, zero1_shard_,
                options_.device.is_cuda() ? Stream::cpu() : stream);
  return upload(host_param_staging_, stream);
}

Tensor FlatParamHandle::quantized_master_on_device(Stream stream) {
  const std::int64_t n1 = zero1_shard_.numel();
  if (!options_.master_on_host) {
    Tensor q = new_buffer(gather_chunk_bytes(), DType::u8, false, stream);
    kernels::quantize_int8(q, zero1_shard_, n1, stream);
    return q;
  }
  // Note [Master in host memory]: quantized on the host, 1 byte an element uploaded.
  wait_for_uploads();  // an earlier upload may still read the staging
  kernels::quantize_int8(host_param_staging_, zero1_shard_, n1,
                         options_.device.is_cuda() ? Stream::cpu() : stream);
  return upload(host_param_staging_, stream);
}

Tensor FlatParamHandle::upload(const Tensor& host, Stream stream) {
  Tensor up = new_buffer(host.numel(), host.dtype(), false, stream);
  up.copy_async_(host, stream);
  if (options_.device.is_cuda()) uploaded_.record(stream);
  return up;
}

std::int64_t FlatParamHandle::gather_chunk_bytes() const {
  const std::int64_t n1 = zero1_shard_.numel();
  return gathers_quantized_ ? kernels::quantized_bytes(n1, n1)
                            : n1 * static_cast<std::int64_t>(dtype_size(options_.param_dtype));
}

void FlatParamHandle::wait_for_uploads() const {
  // On a CPU device the host work is queued on the streams in order instead.
  if (!options_.master_on_host || !options_.device.is_cuda()) return;
  CommWatchdog({groups_.zero1, groups_.zero3, groups_.replica})
      .wait(uploaded_, "uploading the master to the device");
}

void FlatParamHandle::validate_across_ranks() const {
  const auto differ =
      differing_settings(*groups_.zero1, fingerprint(options_, layout_, groups_, shared_));
  ZRT_CHECK_ARG(differ.empty(), "flat parameter '", options_.name,
                "' differs across the zero1 group (", groups_.zero1->name(),
                "):", indented_lines(differ));
}

std::optional<std::size_t> FlatParamHandle::find(const std::string& name) const {
  for (std::size_t i = 0; i < layout_.num_params(); ++i)
    if (layout_.params()[i].fqn == name) return i;
  for (const auto& s : shared_)
    if (s.fqn == name) return s.prim_index;
  return std::nullopt;
}

std::size_t FlatParamHandle::index_of(const std::string& name) const {
  const auto i = find(name);
  ZRT_CHECK_ARG(i.has_value(), "flat parameter '", options_.name, "' has no parameter '", name,
                "'");
  return *i;
}

void FlatParamHandle::expect_state(HandleState expected, const char* call) const {
  ZRT_CHECK_STATE(state_ == expected, "flat parameter '", options_.name, "': ", call,
                  " called in state ", handle_state_name(state_), " (expects ",
                  handle_state_name(expected), ")");
}

Tensor FlatParamHandle::sharded_param(std::size_t i) const {
  ZRT_CHECK_ARG(i < num_params(), "parameter index ", i, " out of range");
  const auto& info = zero1_infos_[i];
  return zero1_shard_.slice(info.offset_in_shard, info.numel_in_shard).set_name(fqn(i));
}

Tensor FlatParamHandle::sharded_grad(std::size_t i) const {
  ZRT_CHECK_ARG(i < num_params(), "parameter index ", i, " out of range");
  const auto& info = zero1_infos_[i];
  return zero1_grad_.slice(info.offset_in_shard, info.numel_in_shard).set_name(fqn(i) + ".grad");
}

Tensor FlatParamHandle::param(std::size_t i) const {
  ZRT_CHECK_ARG(i < num_params(), "parameter index ", i, " out of range");
  const auto& p = layout_.params()[i];
  return param_views_.slice(layout_.param_offset(i), p.padded_numel())
      .view(p.padded_shape())
      .set_name(p.fqn);
}

Tensor FlatParamHandle::grad(std::size_t i) const {
  ZRT_CHECK_ARG(i < num_params(), "parameter index ", i, " out of range");
  const auto& p = layout_.params()[i];
  return grad_views_.slice(layout_.param_offset(i), p.padded_numel())
      .view(p.padded_shape())
      .set_name(p.fqn + ".grad");
}

FlightRecorder::Subject FlatParamHandle::gathers_subject() const {
  // The groups are splits of one world, which share its recorder.
  return FlightRecorder::Subject(*groups_.zero1->flight_recorder(), options_.name);
}

void FlatParamHandle::unshard() {
  const bool allocated = !full_param_.is_freed();
  if (allocated && unsharded_current_) return;  // kept from forward (SHARD_GRAD_OP) or prefetched
  if (unsharded_is_master_) {                   // Note [Unsharded parameter of a world of one]
    if (!allocated) full_param_.storage().borrow_memory(zero1_shard_.storage_ptr());
    unsharded_current_ = true;
    return;
  }
  if (!allocated) alloc_storage(full_param_);
  const FlightRecorder::Subject subject = gathers_subject();
  const Stream comm = comm_stream();
  if (comm != options_.stream) {  // Note [Unshard on the communication stream]
    full_param_.storage().record_use(comm);
    compute_ready_.record(options_.stream);
    compute_ready_.wait(comm);
  }
  if (gathers_quantized_) {
    gather_quantized(comm);
  } else if (needs_param_sync_) {
    // First unshard after an update: cast the fp32 master and gather it over zero1.
    groups_.zero1->all_gather_into_tensor(full_param_, master_on_device(options_.param_dtype, comm),
                                          comm);
  } else {
    groups_.zero3->all_gather_into_tensor(full_param_, zero3_shard_, comm);
  }
  if (comm != options_.stream) gathered_.record(comm);
  unsharded_current_ = true;
}

void FlatParamHandle::gather_quantized(Stream comm) {
  // Note [Quantized parameter gather]: the zero1 group's chunks, from the
  // masters after an update (this rank's zero3 slice of them kept), else
  // the zero3 shards that hold them; the same bytes either way.
  const std::int64_t chunk = gather_chunk_bytes();
  Tensor gathered = new_buffer(groups_.zero1->size() * chunk, DType::u8, false, comm);
  if (needs_param_sync_) {
    groups_.zero1->all_gather_into_tensor(gathered, quantized_master_on_device(comm), comm);
    zero3_shard_.copy_(
        gathered.slice(groups_.zero3->rank() * zero3_shard_.numel(), zero3_shard_.numel()), comm);
  } else {
    groups_.zero3->all_gather_into_tensor(gathered, zero3_shard_, comm);
  }
  kernels::dequantize_int8(full_param_, gathered, zero1_shard_.numel(), comm);
}

void FlatParamHandle::reshard(bool free_unsharded) {
  if (full_param_.is_freed()) return;
  if (needs_param_sync_) {
    // Keep this rank's zero3 slice so later unshards gather over the small group.
    const std::int64_t n3 = zero3_shard_.numel();
    if (!zero3_is_master_ && !gathers_quantized_) {  // the quantized one is kept at the gather
      wait_unsharded();                              // a prefetched gather may still be writing it
      zero3_shard_.copy_(full_param_.slice(groups_.zero3->rank() * n3, n3), options_.stream);
    }
    needs_param_sync_ = false;
  }
  if (free_unsharded) {
    free_storage(full_param_);
    unsharded_current_ = false;
  }
}

void FlatParamHandle::open_views(bool grad) {
  param_views_.storage().borrow_memory(full_param_.storage_ptr());
  if (grad) grad_views_.storage().borrow_memory(full_grad_.storage_ptr());
}

void FlatParamHandle::close_views() noexcept {
  free_storage(param_views_);
  free_storage(grad_views_);
}

void FlatParamHandle::pre_forward() {
  expect_state(HandleState::idle, "pre_forward");
  unshard();
  wait_unsharded();
  open_views(false);
  state_ = HandleState::forward;
}

void FlatParamHandle::post_forward() {
  expect_state(HandleState::forward, "post_forward");
  close_views();
  reshard(options_.reshard_after_forward);
  state_ = HandleState::idle;
}

void FlatParamHandle::pre_backward() {
  expect_state(HandleState::idle, "pre_backward");
  unshard();
  wait_unsharded();
  if (full_grad_.is_freed()) {
    alloc_storage(full_grad_);
    kernels::zero(full_grad_, options_.stream);
  }
  open_views(true);
  state_ = HandleState::backward_pre;
}

void FlatParamHandle::accumulate_runtime_grad() {
  // Note [Padded rows of a parameter]: the caller's gradient views include
  // the padded rows; what was written there would reach the gradient norm
  // (and its clipping) and the padding's update. They take no part in the
  // model: zeroed here, whatever the caller wrote.
  for (std::size_t i = 0; i < num_params(); ++i) {
    const auto& p = layout_.params()[i];
    if (p.pad_rows > 0)
      kernels::zero(
          full_grad_.slice(layout_.param_offset(i) + p.numel(), p.padded_numel() - p.numel()),
          options_.stream);
  }
  if (!full_prec_grad_.is_freed()) {
    kernels::accumulate_grad(full_prec_grad_, full_grad_, 1.0f, options_.stream);
  } else if (grad_offloaded_) {
    alloc_storage(full_prec_grad_);
    full_prec_grad_.copy_async_(host_grad_, options_.stream);  // reload, then add
    grad_offloaded_ = false;
    kernels::accumulate_grad(full_prec_grad_, full_grad_, 1.0f, options_.stream);
  } else if (full_grad_.dtype() == DType::f32) {
    // First micro-batch in fp32: the gradient's memory becomes the fp32
    // gradient's (same size and layout), no copy.
    full_prec_grad_.storage().adopt_memory(full_grad_.storage());
    return;
  } else {
    alloc_storage(full_prec_grad_);
    kernels::cast(full_prec_grad_, full_grad_,
                  options_.stream);  // first micro-batch: no zero + add
  }
  free_storage(full_grad_);
}

void FlatParamHandle::reduce_grads() {
  const ReduceOp op = options_.grad_reduce.op;
  if (grad_is_master_) {  // Note [Unsharded parameter of a world of one]
    free_storage(zero1_grad_);
    zero1_grad_.storage().adopt_memory(full_prec_grad_.storage());
  }
  const bool replicas = groups_.replica && groups_.replica->size() > 1;
  const bool communicates = !grad_is_master_ || replicas;
  const Stream comm = comm_stream();
  const FlightRecorder::Subject subject = gathers_subject();
  if (communicates) {
    if (comm != options_.stream) {  // Note [Unshard on the communication stream]
      (grad_is_master_ ? zero1_grad_ : full_prec_grad_).storage().record_use(comm);
      compute_ready_.record(options_.stream);
      compute_ready_.wait(comm);
    }
    const ReduceDType wire = options_.grad_reduce.dtype;
    if (reduces_quantized_) {
      reduce_scatter_quantized(comm);
    } else if (!grad_is_master_ && wire == ReduceDType::f32) {
      groups_.zero1->reduce_scatter_tensor(zero1_grad_, full_prec_grad_, op, comm);
    } else if (!grad_is_master_) {  // bf16 or f16 (any dtype over one rank is the master)
      const DType t = wire == ReduceDType::bf16 ? DType::bf16 : DType::f16;
      Tensor in = new_buffer(full_prec_grad_.numel(), t, false, comm);
      Tensor out = new_buffer(zero1_grad_.numel(), t, false, comm);
      kernels::cast(in, full_prec_grad_, comm);
      groups_.zero1->reduce_scatter_tensor(out, in, op, comm);
      kernels::cast(zero1_grad_, out, comm);
    }
    if (replicas) groups_.replica->all_reduce(zero1_grad_, op, comm);
  }
  // Note [Master in host memory]: down to the optimizer before `reduced_`
  // says the reduction is done, on the communication stream also where
  // nothing was reduced (a world of one), so that the compute stream goes on.
  if (options_.master_on_host) {
    if (!communicates && comm != options_.stream) {
      zero1_grad_.storage().record_use(comm);
      compute_ready_.record(options_.stream);
      compute_ready_.wait(comm);
    }
    host_zero1_grad_.copy_async_(zero1_grad_, comm);
  }
  if ((communicates || options_.master_on_host) && comm != options_.stream) reduced_.record(comm);
  free_storage(full_prec_grad_);
}

void FlatParamHandle::reduce_scatter_quantized(Stream comm) {
  // Note [Quantized gradient reduce-scatter]: chunk r of the quantized
  // gradient to rank r; the chunks received summed in rank order in fp32.
  const std::int64_t n1 = zero1_grad_.numel();
  const int w = groups_.zero1->size();
  // Every chunk is packed on its own (whole bytes, Note [Blockwise int4 quantization]).
  const kernels::QuantFormat f = options_.grad_reduce.dtype == ReduceDType::int4
                                     ? kernels::QuantFormat::int4
                                     : kernels::QuantFormat::int8;
  const std::int64_t bytes = kernels::quantized_bytes(full_prec_grad_.numel(), n1, f);
  Tensor mine = new_buffer(bytes, DType::u8, false, comm);
  kernels::quantize(mine, full_prec_grad_, n1, f, comm);
  Tensor received = new_buffer(bytes, DType::u8, false, comm);
  groups_.zero1->all_to_all(received, mine, comm);
  kernels::dequantize_sum(zero1_grad_, received, w,
                          options_.grad_reduce.op == ReduceOp::avg ? w : 1, f, comm);
}

void FlatParamHandle::post_backward(bool sync_grads) {
  expect_state(HandleState::backward_pre, "post_backward");
  close_views();
  state_ = HandleState::backward_post;
  try {
    accumulate_runtime_grad();
    reshard(options_.reshard_after_backward);
    if (sync_grads) {
      reduce_grads();
    } else if (options_.grad_reduce.offload) {
      offload_grad();
    }
  } catch (...) {
    // Idle again, the gradient partial (Note [A failed backward skips the
    // step] in zero_module.cpp): the next backward starts from a fresh
    // compute-dtype gradient, not this one. What reduction it issued is
    // waited for before the gradient is poisoned or zeroed.
    free_storage(full_grad_);
    if (comm_stream() != options_.stream) reduced_.record(comm_stream());
    state_ = HandleState::idle;
    throw;
  }
  state_ = HandleState::idle;
}

void FlatParamHandle::offload_grad() {
  if (host_grad_.is_freed()) alloc_storage(host_grad_);
  // Only device work touches host_grad_, all on this stream: no host wait.
  host_grad_.copy_async_(full_prec_grad_, options_.stream);
  free_storage(full_prec_grad_);
  grad_offloaded_ = true;
}

void FlatParamHandle::zero_grad() {
  expect_state(HandleState::idle, "zero_grad");
  free_storage(full_prec_grad_);
  grad_offloaded_ = false;
  kernels::zero(zero1_grad_, options_.stream);
  // The host copy follows in stream order, behind any copy still in flight into it.
  if (options_.master_on_host) host_zero1_grad_.copy_async_(zero1_grad_, options_.stream);
}

void FlatParamHandle::cancel_backward() {
  expect_state(HandleState::backward_pre, "cancel_backward");
  close_views();
  free_storage(full_grad_);  // pre_backward's zeros: every earlier sum is in full_prec_grad_
  state_ = HandleState::idle;
  reshard(options_.reshard_after_backward);
}

void FlatParamHandle::poison_grad() {
  expect_state(HandleState::idle, "poison_grad");
  wait_for_reduced_grads();  // a reduction in flight would overwrite it
  kernels::fill(zero1_grad_, std::numeric_limits<double>::quiet_NaN(), options_.stream);
  if (options_.master_on_host) host_zero1_grad_.copy_async_(zero1_grad_, options_.stream);
}

void FlatParamHandle::add_to_grad(std::size_t i, const Tensor& grad) {
  ZRT_CHECK_ARG(i < num_params(), "parameter index ", i, " out of range");
  ZRT_CHECK_STATE(state_ == HandleState::idle || state_ == HandleState::forward ||
                      state_ == HandleState::backward_pre,
                  "flat parameter '", options_.name, "': add_to_grad called in state ",
                  handle_state_name(state_));
  const auto& p = layout_.params()[i];
  ZRT_CHECK_ARG(grad.numel() == p.padded_numel(), "flat parameter '", options_.name,
                "': a gradient of ", grad.numel(), " elements for '", p.fqn, "' of ",
                p.padded_numel());
  if (full_prec_grad_.is_freed()) {
    // As accumulate_runtime_grad finds it: the offloaded sum so far, or nothing yet.
    alloc_storage(full_prec_grad_);
    if (grad_offloaded_) {
      full_prec_grad_.copy_async_(host_grad_, options_.stream);
      grad_offloaded_ = false;
    } else {
      kernels::zero(full_prec_grad_, options_.stream);
    }
  }
  // The parameter's own rows: its padded rows' gradient stays zero
  // (Note [Padded rows of a parameter]).
  kernels::accumulate_grad(full_prec_grad_.slice(layout_.param_offset(i), p.numel()),
                           grad.flatten().slice(0, p.numel()), 1.0f, options_.stream);
  // Outside its own backward scope the sum goes back to host memory, as a
  // post_backward without sync leaves it: the device does not hold it while
  // other units' backward runs.
  if (options_.grad_reduce.offload && state_ != HandleState::backward_pre) offload_grad();
}

Stream FlatParamHandle::host_read_gather_stream() const {
  const Stream compute = options_.stream;
  if (!compute.cpu_queue() || compute.discards()) return compute;
  compute.synchronize();  // its queued updates come first
  return Stream::cpu();
}

std::vector<Tensor> FlatParamHandle::summon_full_params() {
  expect_state(HandleState::idle, "summon_full_params");
  state_ = HandleState::summon_full_params;
  const FlightRecorder::Subject subject = gathers_subject();
  std::vector<Tensor> out;
  try {
    const Stream s = host_read_gather_stream();
    Tensor full = new_buffer(layout_.numel_padded(), DType::f32, false, s);
    groups_.zero1->all_gather_into_tensor(full, master_on_device(DType::f32, s), s);
    s.synchronize();  // the clones below copy on another stream
    for (std::size_t i = 0; i < num_params(); ++i) {
      const auto& p = layout_.params()[i];
      out.push_back(
          full.slice(layout_.param_offset(i), p.numel()).view(p.shape).clone().set_name(p.fqn));
    }
  } catch (...) {
    state_ = HandleState::idle;
    throw;
  }
  state_ = HandleState::idle;
  return out;
}

void FlatParamHandle::gather_full_params(const ParamPieceSink& sink, std::int64_t budget) {
  expect_state(HandleState::idle, "gather_full_params");
  state_ = HandleState::summon_full_params;
  const FlightRecorder::Subject subject = gathers_subject();
  try {
    const Stream s = host_read_gather_stream();
    const std::int64_t n1 = zero1_shard_.numel();
    const int z = groups_.zero1->size();
    const std::int64_t most = std::max<std::int64_t>(1, std::min(budget / z, n1));
    Tensor buffer = new_buffer(z * most, DType::f32, false, s);
    for (std::int64_t k = 0; k < n1; k += most) {
      const std::int64_t c = std::min(most, n1 - k);
      Tensor out = buffer.slice(0, z * c);
      // Piece r of `out`: flat elements [r * n1 + k, r * n1 + k + c).
      Tensor in = zero1_shard_.slice(k, c);
      if (options_.master_on_host) {
        // Note [Master in host memory]: this chunk of the master goes up
        // straight into this rank's piece (the in-place gather), so the
        // device holds the buffer alone, whatever the shard's size.
        Tensor mine = out.slice(groups_.zero1->rank() * c, c);
        mine.copy_async_(in, s);
        in = mine;
      }
      groups_.zero1->all_gather_into_tensor(out, in, s);
      s.synchronize();  // the gather, and the upload that reads the master
      const Tensor host = out.device().is_cpu() ? out : out.to(Device::cpu());
      const float* data = host.data<float>();
      for (int r = 0; r < z; ++r) {
        const std::int64_t lo = r * n1 + k, hi = lo + c;
        for (std::size_t i = 0; i < num_params(); ++i) {
          const std::int64_t begin = layout_.param_offset(i);
          const std::int64_t a = std::max(lo, begin);
          const std::int64_t b = std::min(hi, begin + layout_.params()[i].numel());
          if (a < b) sink(i, a - begin, b - a, data + r * c + (a - lo));
        }
      }
    }
  } catch (...) {
    state_ = HandleState::idle;
    throw;
  }
  state_ = HandleState::idle;
}

std::vector<std::size_t> FlatParamHandle::non_finite_params() {
  expect_state(HandleState::idle, "non_finite_params");
  // Read where it lives, in the order it is written: a master in host memory
  // is not uploaded (Note [Master in host memory]).
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < num_params(); ++i) {
    const ShardParamInfo& info = zero1_infos_[i];
    if (info.in_shard && info.numel_in_shard > 0 &&
        kernels::has_non_finite(zero1_shard_.slice(info.offset_in_shard, info.numel_in_shard),
                                master_stream()))
      out.push_back(i);
  }
  return out;
}

void FlatParamHandle::load_full_params(const std::vector<Tensor>& values) {
  expect_state(HandleState::idle, "load_full_params");
  ZRT_CHECK_ARG(values.size() == num_params(), "flat parameter '", options_.name, "' has ",
                num_params(), " parameters but load_full_params got ", values.size());
  for (std::size_t i = 0; i < num_params(); ++i)
    ZRT_CHECK_ARG(values[i].shape() == layout_.params()[i].shape, "load_full_params: '", fqn(i),
                  "' has shape ", shape_str(layout_.params()[i].shape), " but the value has ",
                  shape_str(values[i].shape()));
  state_ = HandleState::sync_params;
  wait_for_uploads();  // the master is written below
  for (std::size_t i = 0; i < num_params(); ++i) {
    const auto& info = zero1_infos_[i];
    if (!info.in_shard) continue;
    Tensor src = values[i].flatten().slice(info.intra_param_start, info.numel_in_shard);
    // A value on the device is read in the compute stream's order.
    zero1_shard_.slice(info.offset_in_shard, info.numel_in_shard)
        .copy_(src, src.device().is_cpu() ? master_stream() : options_.stream);
  }
  options_.stream.synchronize();  // the copies read the caller's tensors
  mark_params_updated();
  state_ = HandleState::idle;
}

}  // namespace zrt::optim
