// One Communicator interface over zrt tensors; backends: NCCL (CUDA tensors),
// MPI (CPU tensors, multi-process), Local (ranks as threads of one process).
//
// Note [Collective contract]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// The public methods are non-virtual: they validate arguments (sizes, dtypes,
// devices, freed storage) and throw InvalidArgument before any data moves,
// count the collective's sequence number, then call the backend's do_*.
// Every rank of the group must call the same collectives in the same order,
// and the backends check it before data moves: each rank describes its
// collective in a CollectiveContract (collective_contract.h: the op, the
// sequence number, the dtype and element count each rank passes, the reduce
// op, the root; all_gather_bytes' lengths may differ, split's colors and
// keys do) with the caller's label from the flight recorder
// (FlightRecorder::Caller, e.g. "full_param('fc1.weight')") and what the
// collective moves where the caller names it (FlightRecorder::Subject: a flat
// parameter's gathers and reductions name it, so two units of one size that
// the ranks gather in different orders disagree instead of exchanging each
// other's shards), the ranks
// exchange them, and on a mismatch every rank throws the same CommError
// naming what each rank issued, rather than MPI matching the calls by order
// into MPI_ERR_TRUNCATE or wrong data:
//   collective #12 of group 'world' does not match across ranks: rank 0
//   issued all_gather of 4 f32 values (16 bytes) in full_param('fc1.weight');
//   rank 1 issued all_gather of 262144 f32 values (1048576 bytes) in
//   full_params(); every rank must call the same collectives in the same order
// The local backend compares them at its rendezvous (Note [Local
// rendezvous]), at no cost; MPI all-gathers them first, in place of the
// entry barrier all_reduce had anyway (Note [Entry barrier]). NCCL does not
// check: an exchange would cost a host round trip (or a device all-gather
// and a stream sync) per collective, which its enqueue-and-return design
// exists to avoid; a mismatch there hangs until the comm watchdog's timeout,
// whose flight recorder report names where each rank is (Note [Flight
// recorder]).
// `stream` is where the collective is ordered: on the default CPU stream it
// finishes before returning; on an owned CPU stream it runs on the stream's
// thread (Note [CPU streams]); NCCL enqueues on it. The caller orders other
// streams with events. A group's collectives run in the order they were
// issued, whatever their streams: one issued on another CPU stream than the
// previous one waits for it, and one that runs on the calling thread
// (barrier, all_gather_bytes, split, any collective on the default stream)
// first waits for those queued. Every blocking wait honours timeout(); on
// expiry the backend throws CommError naming the op, the group, the sequence
// number and, where known, the ranks that did not arrive. The host waits for
// work that may hold collectives through a CommWatchdog (Note [Comm
// watchdog]), which bounds even a backend call with no deadline of its own:
// past the timeout it abort()s the group.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "zrt/runtime/comm/collective_contract.h"
#include "zrt/runtime/comm/comm_traffic.h"
#include "zrt/runtime/comm/flight_recorder.h"
#include "zrt/runtime/comm/link_model.h"
#include "zrt/runtime/error.h"
#include "zrt/runtime/phase_timer.h"
#include "zrt/runtime/stream.h"
#include "zrt/runtime/tensor.h"
#include "zrt/runtime/trace.h"

namespace zrt {

class Communicator {
 public:
  virtual ~Communicator() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The group's name in messages, e.g. "world", "world/split(1)".
  const std::string& name() const { return name_; }
  // Collectives issued so far (the last one's sequence number).
  std::uint64_t sequence_number() const { return seq_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds t) {
    ZRT_CHECK_ARG(t.count() > 0, "Communicator::set_timeout: the timeout of group ", name_,
                  " must be positive, got ", t.count(), " ms");
    timeout_ = t;
    timeout_from_environment_ = false;
  }
  // Whether the timeout is ZRT_COMM_TIMEOUT_S's default, read at creation
  // (what a timeout message names), not one set on the group or its parent.
  bool timeout_from_environment() const { return timeout_from_environment_; }
  // Records every collective of this group (and of groups split from it
  // afterwards) on the tracer's communication track; null: none.
  void set_tracer(TracerPtr tracer) { tracer_ = std::move(tracer); }
  const TracerPtr& tracer() const { return tracer_; }
  // Times every collective issued to a stream by this group (and by groups
  // split from it afterwards) as communication (Note [Step phase times]);
  // null: none.
  void set_phase_timer(PhaseTimerPtr timer) { phase_timer_ = std::move(timer); }
  const PhaseTimerPtr& phase_timer() const { return phase_timer_; }
  // This rank's ring of its last collectives, shared by the groups split
  // from this one (Note [Flight recorder]).
  const std::shared_ptr<FlightRecorder>& flight_recorder() const { return flight_; }
  // Records this group's collectives in a ring of its own from now on: a
  // group whose collectives run beside the rank's others (a background
  // checkpoint writer's), which would otherwise look like where the rank is
  // stuck in a report of the rank's ring.
  void use_own_flight_recorder();
  // The bytes this rank's tensor collectives put on the link, counted as
  // they are issued (Note [Bytes on the link]); shared by the groups split
  // from this one afterwards.
  const std::shared_ptr<CommTraffic>& traffic() const { return traffic_; }
  // Counts this group's collectives apart from now on (a background
  // checkpoint writer's are no step's traffic).
  void count_own_traffic() { traffic_ = std::make_shared<CommTraffic>(); }
  // Holds each tensor collective of this group (and of groups split from it
  // afterwards) issued from now on for the modelled link time, on the host
  // backends (Note [Link model]); InvalidArgument for a bad model.
  void set_link_model(const LinkModel& model);
  const LinkModel& link_model() const { return link_; }

  // out.numel() == size() * in.numel(); rank r's input lands at [r*n, (r+1)*n).
  void all_gather_into_tensor(const Tensor& out, const Tensor& in, Stream stream = {});
  // in.numel() == size() * out.numel(); rank r receives the reduction of
  // every rank's [r*n, (r+1)*n). ops: sum, avg.
  void reduce_scatter_tensor(const Tensor& out, const Tensor& in, ReduceOp op, Stream stream = {});
  // out.numel() == in.numel() == size() * n: chunk r of this rank's input
  // goes to rank r, and chunk r of the output is rank r's chunk for this
  // rank. out and in must not overlap.
  void all_to_all(const Tensor& out, const Tensor& in, Stream stream = {});
  // ops: sum, avg, max, min.
  void all_reduce(const Tensor& t, ReduceOp op, Stream stream = {});
  void broadcast(const Tensor& t, int root, Stream stream = {});
  void barrier();
  // Small host metadata (fingerprints, sizes): every rank's bytes, by rank.
  std::vector<std::vector<std::byte>> all_gather_bytes(std::span<const std::byte> mine);
  // Ranks with equal color form a new group, ordered by (key, rank).
  // Collective over this group. The child inherits the timeout.
  std::unique_ptr<Communicator> split(int color, int key);
  // The same, naming the child group (e.g. "world/zero3(1)") for messages.
  std::unique_ptr<Communicator> split(int color, int key, std::string child_name);

  // "local", "mpi", "nccl": names the backend in messages.
  virtual const char* backend_name() const { return "custom"; }
  // Whether its collectives take host tensors (not NCCL's, which take only
  // its device's; their all_gather_bytes runs through the device too).
  bool keeps_to_host() const { return accepts_device(Device::cpu()); }

  // Fails this group from any thread (Note [Comm watchdog]): a collective
  // blocked in the backend returns with CommError naming `why`, and every
  // later one of this group fails the same way (NCCL: ncclCommAbort).
  // Idempotent (the first reason stays); never throws.
  void abort(const std::string& why) noexcept;
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  // The first abort's reason; empty when not aborted.
  std::string abort_reason() const;
  // A failure the backend learned of asynchronously, outside any call
  // (NCCL: ncclCommGetAsyncError); empty when none. Polled by the watchdog
  // from the waiting thread.
  virtual std::string async_error() const { return {}; }

 protected:
  Communicator(int rank, int size, std::string name);
  // A CommError message prefix: "<op> #<seq> on group <name> (rank r of n)",
  // with the sequence number of the collective running.
  std::string where(const char* op) const;
  // The sequence number of the collective running (for the backend's do_*).
  std::uint64_t running_sequence_number() const { return running_seq_; }
  // This rank's contract for the collective running (for the backend's do_*):
  // what it exchanges with the other ranks before data moves.
  const CollectiveContract& running_contract() const { return running_contract_; }
  // Throws CommError, the same on every rank, unless every rank's contract
  // (by rank, as exchanged) agrees with rank 0's (Note [Collective contract]).
  void check_contracts(std::span<const CollectiveContract> by_rank) const;
  // Whether the backend moves tensors on `device` (checked before any data moves).
  virtual bool accepts_device(Device /*device*/) const { return true; }

  virtual void do_all_gather(const Tensor& out, const Tensor& in, Stream stream) = 0;
  virtual void do_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op,
                                 Stream stream) = 0;
  virtual void do_all_to_all(const Tensor& out, const Tensor& in, Stream stream) = 0;
  virtual void do_all_reduce(const Tensor& t, ReduceOp op, Stream stream) = 0;
  virtual void do_broadcast(const Tensor& t, int root, Stream stream) = 0;
  virtual void do_barrier() = 0;
  virtual std::vector<std::vector<std::byte>> do_all_gather_bytes(
      std::span<const std::byte> mine) = 0;
  virtual std::unique_ptr<Communicator> do_split(int color, int key, std::string child_name) = 0;
  // The backend's part of abort(): wake what is blocked, fail what comes.
  // Called once, from any thread; must not throw.
  virtual void do_abort(const std::string& why) noexcept = 0;
  // Waits for the collectives this group queued on CPU streams: they call
  // the backend's do_*, so a backend's destructor calls it first. A queued
  // collective whose peers are gone ends at the group's timeout; its error
  // stays with its stream.
  void drain_queued() noexcept;

 private:
  // Numbers a collective, counts its bytes on the link (`kind`, `numel` and
  // `root` as ring_link_bytes takes them) and runs it in `stream`'s order
  // (Note [Collective contract]), held for the link model's time; `trace_name`
  // and `bytes` label its trace event.
  struct Issued {
    const char* trace_name;
    std::size_t bytes;
    CollectiveKind kind;
    std::int64_t numel;
    std::size_t itemsize;
    int root = 0;
    CollectiveContract contract{};  // its seq and caller are filled in at issue
    // What it writes, counted while queued on a CPU stream (Note [Host reads
    // of queued work]).
    const Tensor* written = nullptr;
  };
  void issue(const Issued& what, Stream stream, std::function<void(Stream)> collective);
  // Runs a collective on the calling thread (barrier, split,
  // all_gather_bytes), after the group's collectives queued on CPU streams:
  // numbers it and records it in the flight recorder.
  template <class F>
  auto on_calling_thread(CollectiveContract contract, F&& collective) -> decltype(collective());
  // `c` numbered `seq`, labelled with the flight recorder's caller.
  CollectiveContract numbered(CollectiveContract c, std::uint64_t seq) const;
  // Waits, through a CommWatchdog over this group, for the collectives
  // queued on CPU streams before `op` (which runs on the calling thread).
  void wait_for_queued(const char* op);
  // CommError naming collective #(seq_ + 1) once the group is aborted.
  void check_not_aborted(const char* op) const;

  int rank_;
  int size_;
  std::string name_;
  std::uint64_t seq_ = 0;                // issued (the issuing thread's count)
  std::uint64_t running_seq_ = 0;        // running (set by the thread that runs it)
  CollectiveContract running_contract_;  // the same
  Event queued_{Device::cpu()};          // recorded after each collective queued on a CPU stream
  std::chrono::milliseconds timeout_;
  bool timeout_from_environment_ = true;
  TracerPtr tracer_;
  PhaseTimerPtr phase_timer_;
  std::shared_ptr<FlightRecorder> flight_;
  std::shared_ptr<CommTraffic> traffic_ = std::make_shared<CommTraffic>();
  LinkModel link_;
  std::atomic<bool> aborted_{false};
  mutable std::mutex abort_mu_;  // guards abort_reason_
  std::string abort_reason_;
};

using CommPtr = std::shared_ptr<Communicator>;

// The default timeout: ZRT_COMM_TIMEOUT_S from the environment, else 300 s.
std::chrono::milliseconds default_comm_timeout();

}  // namespace zrt
