// See mpi_comm.h.
#include "zrt/runtime/comm/mpi_comm.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "zrt/runtime/comm/comm_watchdog.h"
#include "zrt/runtime/comm/host_reduce.h"
#include "zrt/runtime/comm/host_staging.h"
#include "zrt/runtime/error.h"

#ifdef ZRT_WITH_MPI
#include <mpi.h>
#endif

namespace zrt {

#ifndef ZRT_WITH_MPI

CommPtr make_mpi_world(std::string) {
  ZRT_THROW(InvalidState,
            "make_mpi_world: this build of zrt has no MPI (configure with ZRT_MPI=ON)");
}

bool abort_mpi_job(int) { return false; }
bool mpi_job_running() { return false; }

#else

namespace {

std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, buf, &len);
  return std::string(buf, static_cast<std::size_t>(len));
}

#define ZRT_MPI_CHECK(expr, where)                                                                \
  do {                                                                                            \
    int zrt_mpi_rc_ = (expr);                                                                     \
    if (zrt_mpi_rc_ != MPI_SUCCESS)                                                               \
      ZRT_THROW(::zrt::MpiError, where, ": ", #expr, " failed: ", mpi_error_string(zrt_mpi_rc_)); \
  } while (0)

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
  }
  return "an unknown thread level";
}

// Note [Blocking MPI calls]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Three calls zrt makes have no form it can wait on with a deadline:
// MPI_Comm_split (MPI has no non-blocking split), MPI_Allreduce above
// kBlockingAllReduceBytes (Note [Entry barrier]: the non-blocking schedule
// is much slower there) and the MPI_Comm_dup that makes the world. The first
// two run after the contracts' exchange, so a rank that never comes is
// caught with a CommError before them; but a rank stopped (SIGSTOP, a
// debugger) or stuck after its contract went out leaves the others inside
// the call, which nothing can wake or cancel. So each such call is armed on
// its session's guard: one thread per MPI session, idle until a call is
// armed. A call still inside MPI kGuardReportWindow past the comm
// watchdog's patience (watchdog_patience) is taken for hung: the guard
// prints the error in the shape of every CommError of a collective ("split
// #3 on group world (rank 0 of 2): still inside MPI_Comm_split ...") and
// ends the whole job with abort_mpi_job (Note [Ending after a timeout]).
// The blocked thread can never return, so ending the job is the only way
// left not to hang. The window leaves the rank's other threads, when one
// waits for the call through the watchdog (a collective on a CPU stream),
// the time to fail with a CommError and report as they do for any timeout
// (zrt-train's flight-recorder report takes up to 15 s, Note [Flight report
// before the job ends]); a call on the waiting thread itself reports
// nothing but the guard's line.
constexpr std::chrono::seconds kGuardReportWindow{20};

class BlockingCallGuard {
 public:
  BlockingCallGuard() = default;
  ~BlockingCallGuard() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  BlockingCallGuard(const BlockingCallGuard&) = delete;
  BlockingCallGuard& operator=(const BlockingCallGuard&) = delete;

  struct Call {
    std::chrono::steady_clock::time_point deadline;
    std::string message;  // printed when the deadline passes
  };
  using Armed = std::list<Call>::iterator;

  Armed arm(std::chrono::milliseconds timeout, std::string message) {
    std::lock_guard lock(mutex_);
    if (!thread_.joinable()) thread_ = std::thread([this] { watch(); });
    calls_.push_back({std::chrono::steady_clock::now() + timeout, std::move(message)});
    wake_.notify_all();
    return std::prev(calls_.end());
  }
  void disarm(Armed call) {
    std::lock_guard lock(mutex_);
    calls_.erase(call);
  }

 private:
  void watch();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::list<Call> calls_;  // armed, in no particular order
  bool stopping_ = false;
  std::thread thread_;
};

// MPI initialised by zrt, finalised when the last communicator that uses it
// goes; a no-op when the application initialised MPI itself.
//
// Note [MPI thread level]
// ~~~~~~~~~~~~~~~~~~~~~~~
// zrt needs MPI_THREAD_MULTIPLE: a rank's collectives queued on its
// communication stream call MPI from that stream's thread (Note [CPU
// streams]) while the rank's own thread may call MPI on another group (a
// barrier, a split, the metadata all-gathers). MPI is initialised asking for
// it; a library (or an application that initialised MPI itself) that gives
// less is refused at once with an error naming both levels, rather than
// risking a crash or a hang in the middle of a run.
class MpiSession {
 public:
  MpiSession() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    int provided = 0;
    if (!initialized) {
      ZRT_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI init");
      owned_ = true;
    } else {
      ZRT_MPI_CHECK(MPI_Query_thread(&provided), "MPI init");
    }
    if (provided < MPI_THREAD_MULTIPLE) {
      if (owned_) MPI_Finalize();
      ZRT_THROW(
          MpiError,
          "zrt needs MPI_THREAD_MULTIPLE (a rank's communication stream calls MPI from its own ",
          "thread), but this MPI provides ", thread_level_name(provided),
          initialized ? " (MPI was initialised before zrt: initialise it with MPI_Init_thread and "
                        "MPI_THREAD_MULTIPLE)"
                      : "");
    }
  }
  ~MpiSession() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    // MPI_Finalize waits for every rank: after a timeout one may be stopped
    // or gone, and it would never return (Note [Ending after a timeout]).
    if (owned_ && !finalized && !broken_.load()) MPI_Finalize();
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  void mark_broken() { broken_.store(true); }
  BlockingCallGuard& guard() { return guard_; }
  // Buffers a request left pending by a timeout may still write: kept until
  // the session ends, after every communicator.
  void keep_until_end(std::shared_ptr<void> buffers) {
    std::lock_guard lock(mutex_);
    kept_.push_back(std::move(buffers));
  }

 private:
  std::mutex mutex_;
  std::vector<std::shared_ptr<void>> kept_;
  bool owned_ = false;
  std::atomic<bool> broken_{false};  // a collective of one of its communicators timed out
  BlockingCallGuard guard_;          // Note [Blocking MPI calls]
};

// Arms `guard` for one blocking call in its scope (Note [Blocking MPI calls]).
class GuardedCall {
 public:
  GuardedCall(BlockingCallGuard& guard, std::chrono::milliseconds timeout, std::string message)
      : guard_(guard), armed_(guard.arm(timeout, std::move(message))) {}
  ~GuardedCall() { guard_.disarm(armed_); }
  GuardedCall(const GuardedCall&) = delete;
  GuardedCall& operator=(const GuardedCall&) = delete;

 private:
  BlockingCallGuard& guard_;
  BlockingCallGuard::Armed armed_;
};

void BlockingCallGuard::watch() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (calls_.empty()) {
      wake_.wait(lock);
      continue;
    }
    const auto first =
        std::min_element(calls_.begin(), calls_.end(),
                         [](const Call& a, const Call& b) { return a.deadline < b.deadline; });
    // A copy: wait_until reads its deadline after waking, when the call
    // may have been disarmed and its entry erased.
    const auto deadline = first->deadline;
    if (std::chrono::steady_clock::now() < deadline) {
      wake_.wait_until(lock, deadline);
      continue;
    }
    std::fprintf(stderr, "zrt: error: %s\n", first->message.c_str());
    lock.unlock();
    if (!abort_mpi_job(1)) std::_Exit(1);
    return;
  }
}

// MPI operators for the 16-bit floats: inout = in (op) inout, in rank order.
template <DType D, ReduceOp Op>
void half_op(void* in, void* inout, int* len, MPI_Datatype*) {
  host_accumulate(in, inout, *len, D, Op);
}

struct HalfOps {
  HalfOps() {
    // Not commutative: MPI then combines in rank order, the same on every run.
    MPI_Op_create(&half_op<DType::bf16, ReduceOp::sum>, 0, &bf16_[0]);
    MPI_Op_create(&half_op<DType::bf16, ReduceOp::max>, 0, &bf16_[1]);
    MPI_Op_create(&half_op<DType::bf16, ReduceOp::min>, 0, &bf16_[2]);
    MPI_Op_create(&half_op<DType::f16, ReduceOp::sum>, 0, &f16_[0]);
    MPI_Op_create(&half_op<DType::f16, ReduceOp::max>, 0, &f16_[1]);
    MPI_Op_create(&half_op<DType::f16, ReduceOp::min>, 0, &f16_[2]);
  }
  ~HalfOps() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    for (MPI_Op& op : bf16_) MPI_Op_free(&op);
    for (MPI_Op& op : f16_) MPI_Op_free(&op);
  }
  HalfOps(const HalfOps&) = delete;
  HalfOps& operator=(const HalfOps&) = delete;
  MPI_Op bf16_[3];  // sum, max, min
  MPI_Op f16_[3];
};

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::i32:
      return MPI_INT32_T;
    case DType::i64:
      return MPI_INT64_T;
    case DType::u8:
      return MPI_UINT8_T;
    case DType::bf16:
    case DType::f16:
      return MPI_UINT16_T;  // combined by HalfOps
  }
  ZRT_THROW(InvalidArgument, "mpi: unknown dtype code ", static_cast<int>(t));
}

// Note [Entry barrier]
// ~~~~~~~~~~~~~~~~~~~~
// Every collective waits with a deadline, so a missing rank is a CommError,
// not a hang, and every collective first checks that all ranks issued the
// same one (Note [Collective contract]). Both come from one entry step: an
// MPI_Iallgather of each rank's CollectiveContract (128 bytes, the same size
// whatever the collective, so ranks in different collectives still meet
// there), polled against the timeout; then each rank compares them and, on
// a mismatch, throws the same CommError before any data moves (MPI would
// otherwise match the ranks' calls by order alone: a smaller buffer on one
// side ends in MPI_ERR_TRUNCATE, equal sizes in silently wrong data).
// barrier is the exchange alone; split runs it before the blocking
// MPI_Comm_split; all_gather_bytes reads each rank's length from it. The
// data then moves with the non-blocking MPI_I* collectives, which for
// all-gather and reduce-scatter run as fast as the blocking calls.
// OpenMPI's MPI_Iallreduce does not: its non-blocking schedule (libnbc) is
// about 2.5x slower than the tuned MPI_Allreduce at tens of MiB, so
// all_reduce calls the blocking MPI_Allreduce after the exchange (which
// replaced the MPI_Ibarrier it had entered before, at the same cost). A
// rank that never arrives is caught by the exchange, which is the failure
// the timeout exists for (a rank stuck or on another code path). The
// trade-off: a rank that dies after the exchange and before or during the
// all-reduce leaves the others blocked in MPI, bounded only by MPI's own
// failure detection (OpenMPI aborts the job when a process exits
// abnormally), and so does a rank that arrives after the others timed out
// in the exchange: their contracts reached it before they gave up, so its
// exchange completes (an MPI_Ibarrier would too in a group of two), and the
// others end the job (Note [Ending after a timeout]). A rank stopped
// (SIGSTOP, a debugger) while it waits in the exchange, its contract already
// sent, is no failure MPI detects: the others would block in MPI_Allreduce
// for ever. So all-reduces of up to kBlockingAllReduceBytes (a step's
// gradient statistics, the loss: latency-bound, where the non-blocking
// schedule costs nothing) run as MPI_Iallreduce waited for under the
// timeout, and only larger ones take the blocking call, armed on a guard
// that ends the job 20 s past the watchdog's patience (Note [Blocking MPI
// calls]): a hang there is a job ended with a message, not a CommError.
// The exchange costs one latency: negligible against the
// bandwidth-bound sizes ZeRO moves, and measured by zrt-bench comm at small
// ones (docs/design.md, Collectives).
constexpr std::size_t kBlockingAllReduceBytes = std::size_t{1} << 20;

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, std::string name, std::shared_ptr<MpiSession> session,
                  std::shared_ptr<HalfOps> ops, std::shared_ptr<HostStagingPool> staging)
      : Communicator(comm_rank(comm), comm_size(comm), std::move(name)),
        session_(std::move(session)),
        ops_(std::move(ops)),
        staging_(std::move(staging)),
        comm_(comm) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }
  ~MpiCommunicator() override {
    drain_queued();
    int finalized = 0;
    MPI_Finalized(&finalized);
    // A request left pending by a timeout still refers to the communicator,
    // and may still write the contract exchange's buffers.
    if (!finalized && !broken_) MPI_Comm_free(&comm_);
    if (broken_) session_->keep_until_end(std::move(exchange_));
  }

  const char* backend_name() const override { return "mpi"; }

 protected:
  bool accepts_device([[maybe_unused]] Device d) const override {
#ifdef ZRT_WITH_CUDA
    return true;
#else
    return d.is_cpu();
#endif
  }

  void do_all_gather(const Tensor& out, const Tensor& in, Stream stream) override {
    const char* op = "all_gather_into_tensor";
    exchange_contracts(op);
    Tensor hin = host_input(in, stream, staging_.get()), hout = host_output(out, staging_.get());
    const bool in_place = out.device().is_cpu() && in.numel() > 0 &&
                          bytes_of(in) == bytes_of(out) + rank() * in.nbytes();
    const int n = count(op, in.numel());
    MPI_Request req;
    ZRT_MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : bytes_of(hin), n, mpi_type(in.dtype()),
                                 mutable_bytes_of(hout), n, mpi_type(in.dtype()), comm_, &req),
                  where(op));
    wait(req, op);
    finish_output(out, hout, stream);
  }

  void do_all_to_all(const Tensor& out, const Tensor& in, Stream stream) override {
    const char* op = "all_to_all";
    exchange_contracts(op);
    Tensor hin = host_input(in, stream, staging_.get()), hout = host_output(out, staging_.get());
    const int n = count(op, in.numel() / size());
    MPI_Request req;
    ZRT_MPI_CHECK(MPI_Ialltoall(bytes_of(hin), n, mpi_type(in.dtype()), mutable_bytes_of(hout), n,
                                mpi_type(in.dtype()), comm_, &req),
                  where(op));
    wait(req, op);
    finish_output(out, hout, stream);
  }

  void do_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp rop,
                         Stream stream) override {
    const char* op = "reduce_scatter_tensor";
    exchange_contracts(op);
    Tensor hin = host_input(in, stream, staging_.get());
    // MPI's in-place form keeps the result at the front of the input, not at
    // this rank's chunk, so an aliased output gets its own buffer.
    Tensor hout = out.device().is_cpu() && !out.shares_storage(in)
                      ? out
                      : host_staging_like(out, staging_.get());
    const int n = count(op, out.numel());
    MPI_Request req;
    ZRT_MPI_CHECK(
        MPI_Ireduce_scatter_block(bytes_of(hin), mutable_bytes_of(hout), n, mpi_type(in.dtype()),
                                  mpi_op(in.dtype(), rop), comm_, &req),
        where(op));
    wait(req, op);
    if (rop == ReduceOp::avg) host_divide(mutable_bytes_of(hout), out.numel(), out.dtype(), size());
    if (hout.storage_ptr() != out.storage_ptr()) Tensor(out).copy_(hout, stream);
  }

  void do_all_reduce(const Tensor& t, ReduceOp rop, Stream stream) override {
    const char* op = "all_reduce";
    // Behind the contracts' exchange, blocking when large: Note [Entry barrier].
    exchange_contracts(op);
    Tensor h = host_input(t, stream, staging_.get());
    if (t.nbytes() > kBlockingAllReduceBytes) {
      const GuardedCall guarded = guard(op, "MPI_Allreduce");
      ZRT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, mutable_bytes_of(h), count(op, t.numel()),
                                  mpi_type(t.dtype()), mpi_op(t.dtype(), rop), comm_),
                    where(op));
    } else {  // waited for under the timeout (Note [Entry barrier])
      MPI_Request req = MPI_REQUEST_NULL;
      ZRT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, mutable_bytes_of(h), count(op, t.numel()),
                                   mpi_type(t.dtype()), mpi_op(t.dtype(), rop), comm_, &req),
                    where(op));
      wait(req, op);
    }
    if (rop == ReduceOp::avg) host_divide(mutable_bytes_of(h), t.numel(), t.dtype(), size());
    finish_output(t, h, stream);
  }

  void do_broadcast(const Tensor& t, int root, Stream stream) override {
    const char* op = "broadcast";
    exchange_contracts(op);
    Tensor h = host_input(t, stream, staging_.get());
    MPI_Request req;
    ZRT_MPI_CHECK(MPI_Ibcast(mutable_bytes_of(h), count(op, t.numel()), mpi_type(t.dtype()), root,
                             comm_, &req),
                  where(op));
    wait(req, op);
    if (rank() != root) finish_output(t, h, stream);
  }

  // Every rank's contract arrives only once every rank has sent it.
  void do_barrier() override { exchange_contracts("barrier"); }

  // The polling wait below sees aborted() and throws; a blocking MPI call
  // cannot be woken (Note [Entry barrier]).
  void do_abort(const std::string&) noexcept override {}

  std::vector<std::vector<std::byte>> do_all_gather_bytes(
      std::span<const std::byte> mine) override {
    const char* op = "all_gather_bytes";
    // Each rank's length travels in its contract (its numel).
    const std::vector<CollectiveContract> contracts = exchange_contracts(op);
    std::vector<int> lengths(size());
    for (int r = 0; r < size(); ++r) lengths[r] = count(op, contracts[r].numel);
    const int my_length = lengths[rank()];
    MPI_Request req;
    std::vector<int> displs(size());
    std::int64_t total = 0;
    for (int r = 0; r < size(); ++r) {
      displs[r] = count(op, total);
      total += lengths[r];
    }
    std::vector<std::byte> all(static_cast<std::size_t>(total));
    ZRT_MPI_CHECK(MPI_Iallgatherv(mine.data(), my_length, MPI_BYTE, all.data(), lengths.data(),
                                  displs.data(), MPI_BYTE, comm_, &req),
                  where(op));
    wait(req, op);
    std::vector<std::vector<std::byte>> out(size());
    for (int r = 0; r < size(); ++r)
      out[r].assign(all.begin() + displs[r], all.begin() + displs[r] + lengths[r]);
    return out;
  }

  std::unique_ptr<Communicator> do_split(int color, int key, std::string child_name) override {
    // MPI_Comm_split blocks without a deadline: the contracts' exchange,
    // with one, comes first, so a missing rank is reported instead of hanging.
    exchange_contracts("split");
    MPI_Comm child;
    {
      const GuardedCall guarded = guard("split", "MPI_Comm_split");
      ZRT_MPI_CHECK(MPI_Comm_split(comm_, color, key, &child), where("split"));
    }
    return std::make_unique<MpiCommunicator>(child, std::move(child_name), session_, ops_,
                                             staging_);
  }

 private:
  static int comm_rank(MPI_Comm c) {
    int r = 0;
    MPI_Comm_rank(c, &r);
    return r;
  }
  static int comm_size(MPI_Comm c) {
    int s = 0;
    MPI_Comm_size(c, &s);
    return s;
  }

  int count(const char* op, std::int64_t n) const {
    ZRT_CHECK_ARG(n <= INT_MAX, where(op), ": ", n, " elements exceed MPI's int count");
    return static_cast<int>(n);
  }

  MPI_Op mpi_op(DType t, ReduceOp op) const {
    const int i = op == ReduceOp::max ? 1 : op == ReduceOp::min ? 2 : 0;  // avg sums
    if (t == DType::bf16) return ops_->bf16_[i];
    if (t == DType::f16) return ops_->f16_[i];
    return i == 1 ? MPI_MAX : i == 2 ? MPI_MIN : MPI_SUM;
  }

  // Note [Entry barrier]: every rank's contract for the collective running,
  // by rank, once they all agree (CommError, the same on every rank, when
  // they do not). One fixed-size all-gather whatever the collective, so
  // ranks in different collectives meet here and see it.
  std::vector<CollectiveContract> exchange_contracts(const char* op) {
    // The communicator's own buffers: a request a timeout leaves pending
    // may still write them after this returns (or throws).
    ZRT_CHECK_AS(CommError, !broken_, where(op),
                 ": the group failed earlier (a collective timed out)");
    ContractExchange& x = *exchange_;
    x.mine = running_contract();
    x.all.assign(static_cast<std::size_t>(size()), CollectiveContract{});
    constexpr int kBytes = sizeof(CollectiveContract);
    MPI_Request req;
    ZRT_MPI_CHECK(
        MPI_Iallgather(&x.mine, kBytes, MPI_BYTE, x.all.data(), kBytes, MPI_BYTE, comm_, &req),
        where(op));
    wait(req, op, /*entered=*/false);
    check_contracts(x.all);
    return x.all;
  }

  // The blocking `call` of collective `op`, every rank's contract in, armed
  // on the session's guard for one timeout (Note [Blocking MPI calls]).
  GuardedCall guard(const char* op, const char* call) {
    const auto limit = watchdog_patience(timeout()) + kGuardReportWindow;
    return GuardedCall(
        session_->guard(), limit,
        detail::concat(where(op), ": still inside ", call, " ", limit.count(),
                       " ms after it began, past the collective timeout of ", timeout().count(),
                       " ms, ", missing_ranks(true, /*name_the_record=*/false),
                       "; MPI cannot cancel that call, so the job ends here"));
  }

  // Polls `req` until it completes or the timeout expires (then CommError).
  // `entered`: every rank's contract came (the data moves), so a rank the
  // request waits for entered the collective.
  void wait(MPI_Request& req, const char* op, bool entered = true) {
    ZRT_CHECK_AS(CommError, !broken_, where(op),
                 ": the group failed earlier (a collective timed out)");
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + timeout();
    for (std::uint64_t polls = 0;; ++polls) {
      int done = 0;
      ZRT_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE), where(op));
      if (done) return;
      // Spin first (latency), then back off so waiting ranks leave the CPU
      // to the ranks still computing.
      if (polls > 10000) std::this_thread::yield();
      if ((polls & 63) == 0 && aborted()) {
        broken_ = true;  // the request stays pending
        ZRT_THROW(CommError, where(op), ": the group was aborted: ", abort_reason());
      }
      if ((polls & 63) == 0 && std::chrono::steady_clock::now() > deadline) {
        broken_ = true;
        session_->mark_broken();
        ZRT_THROW(CommError, where(op), ": timed out after ", timeout().count(), " ms ",
                  missing_ranks(entered), "; mpi backend");
      }
    }
  }

  // Who a timed-out collective waited for: one that did not enter it, or
  // (`entered`, past the contracts' exchange) one that entered it and did not
  // finish it. MPI cannot say which; in a group of two it is the other one,
  // named by its rank in MPI_COMM_WORLD (the rank mpirun gave it). In a
  // larger group the flight recorder's report of all ranks names it (Note
  // [Flight recorder]).
  // `name_the_record`: point to the flight recorder's report, which a
  // CommError's path writes (the guard's abort comes before any).
  std::string missing_ranks(bool entered, bool name_the_record = true) const {
    const char* what = entered ? "entered it and did not finish it (stopped, or stuck inside it)"
                               : "did not enter it";
    if (size() != 2)
      return detail::concat("waiting for some rank of the group that ", what,
                            name_the_record ? " (ZRT_FLIGHT_RECORDER_DIR names it)" : "");
    int peer = 1 - rank();
    MPI_Group group, world;
    if (MPI_Comm_group(comm_, &group) == MPI_SUCCESS) {
      if (MPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS) {
        int in_world = MPI_UNDEFINED;
        MPI_Group_translate_ranks(group, 1, &peer, world, &in_world);
        if (in_world != MPI_UNDEFINED) peer = in_world;
        MPI_Group_free(&world);
      }
      MPI_Group_free(&group);
    }
    return detail::concat("waiting for rank ", peer, ", which ", what);
  }

  std::shared_ptr<MpiSession> session_;
  std::shared_ptr<HalfOps> ops_;
  std::shared_ptr<HostStagingPool> staging_;  // pinned buffers for CUDA tensors
  MPI_Comm comm_;
  bool broken_ = false;
  struct ContractExchange {  // Note [Entry barrier]; the session keeps it once the group is broken
    CollectiveContract mine;
    std::vector<CollectiveContract> all;
  };
  std::shared_ptr<ContractExchange> exchange_ = std::make_shared<ContractExchange>();
};

}  // namespace

bool mpi_job_running() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

bool abort_mpi_job(int code) {
  if (!mpi_job_running()) return false;
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  return true;  // not reached: MPI_Abort ends this process
}

CommPtr make_mpi_world(std::string name) {
  auto session = std::make_shared<MpiSession>();
  MPI_Comm dup;
  {
    // Collective over every process of the job (Note [Blocking MPI calls]).
    const auto limit = watchdog_patience(default_comm_timeout()) + kGuardReportWindow;
    const GuardedCall guarded(
        session->guard(), limit,
        detail::concat("creating the MPI world: still inside MPI_Comm_dup of MPI_COMM_WORLD ",
                       limit.count(),
                       " ms after it began, waiting for some rank that did not create its world "
                       "(stopped, stuck, or on another code path; ZRT_COMM_TIMEOUT_S sets the "
                       "limit); MPI cannot cancel that call, so the job ends here"));
    ZRT_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "make_mpi_world");
  }
  auto world = std::make_shared<MpiCommunicator>(dup, std::move(name), std::move(session),
                                                 std::make_shared<HalfOps>(),
                                                 std::make_shared<HostStagingPool>());
  world->set_link_model(link_model_from_env());  // Note [Link model]
  return world;
}

#endif  // ZRT_WITH_MPI

}  // namespace zrt
