// See nccl_comm.h.
#include "zrt/runtime/comm/nccl_comm.h"

#include "zrt/runtime/error.h"

#ifdef ZRT_WITH_NCCL
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "zrt/runtime/comm/comm_creation.h"
#include "zrt/runtime/comm/comm_watchdog.h"
#include "zrt/runtime/comm/host_reduce.h"
#include "zrt/runtime/comm/host_staging.h"
#include "zrt/runtime/cuda_check.h"
#endif

namespace zrt {

#ifndef ZRT_WITH_NCCL

CommPtr make_nccl_communicator(const BytesAllGather&, int, int, int, std::chrono::milliseconds,
                               std::string) {
  ZRT_THROW(InvalidState,
            "make_nccl_communicator: this build of zrt has no NCCL "
            "(configure with ZRT_CUDA=ON where NCCL is installed)");
}

#else

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32:
      return ncclFloat32;
    case DType::bf16:
      return ncclBfloat16;
    case DType::f16:
      return ncclFloat16;
    case DType::f64:
      return ncclFloat64;
    case DType::i32:
      return ncclInt32;
    case DType::i64:
      return ncclInt64;
    case DType::u8:
      return ncclUint8;
  }
  ZRT_THROW(InvalidArgument, "nccl: unknown dtype code ", static_cast<int>(t));
}

// ncclAvg exists for floating types only; integer avg is a sum divided on the host.
ncclRedOp_t nccl_op(ReduceOp op, DType t) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::avg:
      return is_floating(t) ? ncclAvg : ncclSum;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::min:
      return ncclMin;
  }
  return ncclSum;
}

cudaStream_t native(Stream s) { return static_cast<cudaStream_t>(s.native()); }

using Clock = std::chrono::steady_clock;

// A comm's async state: ncclCommGetAsyncError's answer, or its own failure.
ncclResult_t async_state(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  const ncclResult_t rc = ncclCommGetAsyncError(comm, &state);
  return rc != ncclSuccess ? rc : state;
}

// A non-blocking NCCL call returns ncclInProgress until `comm` has taken the
// work: poll its async state until it settles or `deadline` passes (then
// ncclInProgress is returned).
ncclResult_t settle(ncclComm_t comm, ncclResult_t rc, Clock::time_point deadline) {
  if (rc != ncclInProgress) return rc;
  return poll_while_in_progress(
      ncclInProgress, [&] { return async_state(comm); }, deadline);
}

// Waits for a communicator being made (Note [Non-blocking communicator
// creation]): `owner` is the parent of a split, null for an init, whose
// handle `*made` holds from the call on.
Created<ncclComm_t, ncclResult_t> await_made(ncclComm_t owner, ncclComm_t* made, ncclResult_t call,
                                             bool want_handle, Clock::time_point deadline) {
  CreationPolls<ncclComm_t, ncclResult_t> polls{ncclSuccess, ncclInProgress, nullptr, nullptr,
                                                async_state};
  if (owner != nullptr) polls.owner = [owner] { return async_state(owner); };
  // NCCL publishes a split's child from its job's thread.
  polls.handle = [made] { return __atomic_load_n(made, __ATOMIC_ACQUIRE); };
  return await_creation(polls, call, want_handle, deadline);
}

std::string nccl_failure(ncclResult_t rc, std::chrono::milliseconds timeout) {
  return rc == ncclInProgress ? detail::concat("timed out after ", timeout.count(), " ms")
                              : detail::concat("NCCL error: ", ncclGetErrorString(rc));
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int size, int device, std::string name,
                   std::chrono::milliseconds timeout)
      : Communicator(rank, size, std::move(name)), comm_(comm), device_(device) {
    set_timeout(timeout);
  }

  // Joins a new communicator (collective over the `size` ranks).
  static std::unique_ptr<NcclCommunicator> init(const ncclUniqueId& id, int rank, int size,
                                                int device, std::string name,
                                                std::chrono::milliseconds timeout) {
    CudaDeviceGuard guard(device);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    const ncclResult_t rc = ncclCommInitRankConfig(&comm, size, id, rank, &config);
    const auto made = await_made(nullptr, &comm, rc, true, Clock::now() + timeout);
    if (made.result != ncclSuccess || made.missing) {
      if (made.handle != nullptr) ncclCommAbort(made.handle);
      const std::string why =
          made.missing ? "NCCL returned no communicator" : nccl_failure(made.result, timeout);
      ZRT_THROW(CommError, "NCCL init of rank ", rank, " of ", size, " on group ", name, ": ", why);
    }
    return std::make_unique<NcclCommunicator>(made.handle, rank, size, device, std::move(name),
                                              timeout);
  }

  ~NcclCommunicator() override {
    if (comm_ == nullptr) return;  // aborted by fail()
    try {
      CudaDeviceGuard guard(device_);
      // Finalize flushes outstanding work; bounded by the timeout, else abort.
      ncclResult_t rc = settle(comm_, ncclCommFinalize(comm_), Clock::now() + timeout());
      if (rc == ncclSuccess)
        ncclCommDestroy(comm_);
      else
        ncclCommAbort(comm_);
    } catch (const std::exception& e) {
      report_in_destructor("~NcclCommunicator", e);
    }
  }

  const char* backend_name() const override { return "nccl"; }

  // The watchdog's error predicate: ncclCommGetAsyncError (a peer's
  // failure, a network error); empty while the communicator is healthy.
  // Called on the thread that issues this group's collectives, as abort().
  std::string async_error() const override {
    if (comm_ == nullptr) return {};  // aborted: abort_reason() says why
    ncclResult_t async = ncclSuccess;
    const ncclResult_t rc = ncclCommGetAsyncError(comm_, &async);
    if (rc != ncclSuccess)
      return detail::concat("ncclCommGetAsyncError failed: ", ncclGetErrorString(rc));
    if (async == ncclSuccess || async == ncclInProgress) return {};
    return detail::concat("NCCL error: ", ncclGetErrorString(async));
  }

 protected:
  bool accepts_device(Device d) const override { return d == Device::cuda(device_); }

  void do_all_gather(const Tensor& out, const Tensor& in, Stream stream) override {
    CudaDeviceGuard guard(device_);
    check_enqueued(ncclAllGather(bytes_of(in), mutable_bytes_of(out), in.numel(),
                                 nccl_type(in.dtype()), comm_, native(stream)),
                   "all_gather_into_tensor");
  }

  void do_all_to_all(const Tensor& out, const Tensor& in, Stream stream) override {
    CudaDeviceGuard guard(device_);
    const std::size_t n = static_cast<std::size_t>(in.numel() / size());
    const std::size_t bytes = n * in.itemsize();
    // One send and one receive per peer, fused into one collective by the
    // group. The group is closed before any failure is acted on: a group left
    // open would defer this thread's next NCCL calls (the error's agreement)
    // forever, and aborting the communicator inside it would leave NCCL to
    // flush the queued tasks of a torn-down communicator at the group's end.
    check_enqueued(ncclGroupStart(), "all_to_all");
    const auto queued = [](ncclResult_t rc) { return rc == ncclSuccess || rc == ncclInProgress; };
    ncclResult_t rc = ncclSuccess;
    for (int r = 0; r < size() && queued(rc); ++r) {
      rc = ncclSend(bytes_of(in) + r * bytes, n, nccl_type(in.dtype()), r, comm_, native(stream));
      if (queued(rc))
        rc = ncclRecv(mutable_bytes_of(out) + r * bytes, n, nccl_type(in.dtype()), r, comm_,
                      native(stream));
    }
    const ncclResult_t ended = ncclGroupEnd();
    check_enqueued(queued(rc) ? ended : rc, "all_to_all");
  }

  void do_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op, Stream stream) override {
    CudaDeviceGuard guard(device_);
    check_enqueued(
        ncclReduceScatter(bytes_of(in), mutable_bytes_of(out), out.numel(), nccl_type(in.dtype()),
                          nccl_op(op, in.dtype()), comm_, native(stream)),
        "reduce_scatter_tensor");
    integer_avg(out, op, stream);
  }

  void do_all_reduce(const Tensor& t, ReduceOp op, Stream stream) override {
    CudaDeviceGuard guard(device_);
    check_enqueued(ncclAllReduce(bytes_of(t), mutable_bytes_of(t), t.numel(), nccl_type(t.dtype()),
                                 nccl_op(op, t.dtype()), comm_, native(stream)),
                   "all_reduce");
    integer_avg(t, op, stream);
  }

  void do_broadcast(const Tensor& t, int root, Stream stream) override {
    CudaDeviceGuard guard(device_);
    check_enqueued(ncclBroadcast(bytes_of(t), mutable_bytes_of(t), t.numel(), nccl_type(t.dtype()),
                                 root, comm_, native(stream)),
                   "broadcast");
  }

  void do_barrier() override {
    CudaDeviceGuard guard(device_);
    Tensor one = Tensor::zeros({1}, DType::i32, Device::cuda(device_));
    check_enqueued(ncclAllReduce(bytes_of(one), mutable_bytes_of(one), 1, ncclInt32, ncclSum, comm_,
                                 native(own_stream_)),
                   "barrier");
    wait_stream(own_stream_, "barrier");
  }

  std::vector<std::vector<std::byte>> do_all_gather_bytes(
      std::span<const std::byte> mine) override {
    const char* op = "all_gather_bytes";
    CudaDeviceGuard guard(device_);
    const Device dev = Device::cuda(device_);
    // The lengths first, then every rank's bytes padded to the longest.
    Tensor len = Tensor::from_doubles({static_cast<double>(mine.size())}, DType::i64, dev);
    Tensor lens = Tensor::empty({size()}, DType::i64, dev);
    check_enqueued(ncclAllGather(bytes_of(len), mutable_bytes_of(lens), 1, ncclInt64, comm_,
                                 native(own_stream_)),
                   op);
    wait_stream(own_stream_, op);
    const std::vector<double> lengths = lens.to_doubles();
    std::int64_t longest = 0;
    for (double l : lengths)
      longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(l));
    std::vector<std::vector<std::byte>> all(size());
    if (longest == 0) return all;
    Tensor host = Tensor::zeros({longest}, DType::u8);
    if (!mine.empty()) std::memcpy(host.data_ptr(), mine.data(), mine.size());
    Tensor send = host.to(dev);
    Tensor recv = Tensor::empty({size() * longest}, DType::u8, dev);
    check_enqueued(ncclAllGather(bytes_of(send), mutable_bytes_of(recv), longest, ncclUint8, comm_,
                                 native(own_stream_)),
                   op);
    wait_stream(own_stream_, op);
    Tensor got = recv.to(Device::cpu());
    for (int r = 0; r < size(); ++r) {
      const std::byte* p = bytes_of(got) + r * longest;
      all[r].assign(p, p + static_cast<std::int64_t>(lengths[r]));
    }
    return all;
  }

  // ncclCommAbort: the kernels of this communicator stop and its stream
  // drains; every later call fails (broken_, Communicator::aborted()).
  void do_abort(const std::string&) noexcept override {
    broken_ = true;
    if (comm_ == nullptr) return;
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }

  // Note [Non-blocking communicator creation]: the child exists once the
  // parent's split job has ended, and is ready once its own init has.
  std::unique_ptr<Communicator> do_split(int color, int key, std::string child_name) override {
    CudaDeviceGuard guard(device_);
    ZRT_CHECK_AS(CommError, !broken_, where("split"), ": the communicator failed earlier");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t child = nullptr;
    const ncclResult_t rc = ncclCommSplit(comm_, color, key, &child, &config);
    // Communicator::split takes colors >= 0, so every rank joins a group:
    // no rank passes NCCL_SPLIT_NOCOLOR, the one color whose NULL is an answer.
    const bool joins = color != NCCL_SPLIT_NOCOLOR;
    const auto made = await_made(comm_, &child, rc, joins, Clock::now() + timeout());
    if (made.result != ncclSuccess || made.missing) {
      if (made.handle != nullptr) ncclCommAbort(made.handle);
      fail("split", made.missing ? "NCCL made no child communicator for this rank"
                                 : nccl_failure(made.result, timeout()));
    }
    int rank = -1, size = 0;
    const ncclResult_t rank_rc = ncclCommUserRank(made.handle, &rank);
    const ncclResult_t size_rc = ncclCommCount(made.handle, &size);
    if (rank_rc != ncclSuccess || size_rc != ncclSuccess || rank < 0 || rank >= size) {
      ncclCommAbort(made.handle);
      fail("split",
           detail::concat("the child communicator reports rank ", rank, " of ", size, " (",
                          ncclGetErrorString(rank_rc != ncclSuccess ? rank_rc : size_rc), ")"));
    }
    return std::make_unique<NcclCommunicator>(made.handle, rank, size, device_,
                                              std::move(child_name), timeout());
  }

 private:
  // Integer avg: NCCL summed; divide on the host (rare, small tensors).
  void integer_avg(const Tensor& t, ReduceOp op, Stream stream) {
    if (op != ReduceOp::avg || is_floating(t.dtype()) || t.numel() == 0) return;
    Tensor h = host_input(t, stream);
    host_divide(mutable_bytes_of(h), h.numel(), h.dtype(), size());
    finish_output(t, h, stream);
  }

  [[noreturn]] void fail(const char* op, const std::string& why) {
    const std::string message =
        detail::concat(where(op), ": ", why, " (nccl backend; communicator aborted)");
    abort(message);
    ZRT_THROW(CommError, message);
  }

  // Waits until this communicator has taken the work of a non-blocking call.
  void check_enqueued(ncclResult_t rc, const char* op) {
    ZRT_CHECK_AS(CommError, !broken_, where(op), ": the communicator failed earlier");
    rc = settle(comm_, rc, Clock::now() + timeout());
    if (rc != ncclSuccess) fail(op, nccl_failure(rc, timeout()));
  }

  // Blocks until `stream` has finished, through the watchdog (Note [Comm
  // watchdog]): it polls the stream and async_error(), and aborts this
  // communicator past the timeout.
  void wait_stream(Stream stream, const char* op) {
    CommWatchdog(std::vector<Communicator*>{this}).synchronize(stream, op);
  }

  ncclComm_t comm_;
  int device_;
  OwnedStream own_stream_{Device::cuda(device_)};
  bool broken_ = false;
};

}  // namespace

CommPtr make_nccl_communicator(const BytesAllGather& all_gather_bytes, int rank, int size,
                               int device, std::chrono::milliseconds timeout, std::string name) {
  ZRT_CHECK_ARG(device >= 0 && device < cuda_device_count(),
                "make_nccl_communicator: cuda:", device, " is not a usable device (",
                cuda_device_count(), " present)");
  ncclUniqueId id{};
  if (rank == 0) {
    ncclResult_t rc = ncclGetUniqueId(&id);
    ZRT_CHECK_AS(NcclError, rc == ncclSuccess, "ncclGetUniqueId: ", ncclGetErrorString(rc));
  }
  auto all = all_gather_bytes(std::as_bytes(std::span(&id, 1)));
  ZRT_CHECK_STATE(all.size() == static_cast<std::size_t>(size) && all[0].size() == sizeof id,
                  "make_nccl_communicator: rank 0 sent ", all.empty() ? 0 : all[0].size(),
                  " bytes for the NCCL unique id");
  std::memcpy(&id, all[0].data(), sizeof id);
  return NcclCommunicator::init(id, rank, size, device, std::move(name), timeout);
}

#endif  // ZRT_WITH_NCCL

CommPtr make_nccl_communicator(Communicator& bootstrap, int device, std::string name) {
  return make_nccl_communicator(
      [&](std::span<const std::byte> mine) { return bootstrap.all_gather_bytes(mine); },
      bootstrap.rank(), bootstrap.size(), device, bootstrap.timeout(), std::move(name));
}

}  // namespace zrt
