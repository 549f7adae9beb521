// The Communicator base: argument validation and sequence numbering shared by
// every backend (see Note [Collective contract] in communicator.h).
#include "zrt/runtime/comm/communicator.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "zrt/runtime/comm/comm_watchdog.h"
#include "zrt/runtime/error.h"

namespace zrt {

std::chrono::milliseconds default_comm_timeout() {
  const char* env = std::getenv("ZRT_COMM_TIMEOUT_S");
  if (env == nullptr || *env == '\0') return std::chrono::seconds(300);
  char* end = nullptr;
  errno = 0;
  double seconds = std::strtod(env, &end);
  // Decimal only: strtod would also take leading blanks and hexadecimal.
  const bool decimal = (std::isdigit(static_cast<unsigned char>(env[0])) || env[0] == '.') &&
                       std::strpbrk(env, "xXpP") == nullptr;
  ZRT_CHECK_ARG(
      decimal && errno == 0 && end != env && *end == '\0' && std::isfinite(seconds) && seconds > 0,
      "ZRT_COMM_TIMEOUT_S='", env, "' is not a positive number of seconds");
  // A deadline is now + timeout on a nanosecond clock: far larger values
  // would overflow it into an immediate or negative timeout.
  constexpr double kMaxSeconds = 1e8;  // about three years
  ZRT_CHECK_ARG(seconds <= kMaxSeconds, "ZRT_COMM_TIMEOUT_S='", env,
                "' is above the longest timeout, ", kMaxSeconds, " seconds");
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(seconds * 1000.0)));
}

Communicator::Communicator(int rank, int size, std::string name)
    : rank_(rank),
      size_(size),
      name_(std::move(name)),
      timeout_(default_comm_timeout()),
      flight_(std::make_shared<FlightRecorder>(rank)) {
  ZRT_CHECK_ARG(size >= 1 && rank >= 0 && rank < size, "communicator '", name_, "': rank ", rank,
                " is not in a group of size ", size);
}

std::string Communicator::where(const char* op) const {
  return detail::concat(op, " #", running_seq_, " on group ", name_, " (rank ", rank_, " of ",
                        size_, ")");
}

namespace {

// Checks what every tensor argument of a collective needs: live storage large
// enough for the view, and a device (and stream) this backend can move.
void check_tensor(const Communicator& c, bool device_ok, const char* op, const char* role,
                  const Tensor& t, Stream stream) {
  ZRT_CHECK_ARG(t.numel() == 0 || !t.is_freed(), op, " on group ", c.name(), ": ", role, " ",
                t.freed_str());
  ZRT_CHECK_ARG(t.numel() == 0 || t.storage().nbytes() >= (static_cast<std::size_t>(t.offset()) +
                                                           static_cast<std::size_t>(t.numel())) *
                                                              t.itemsize(),
                op, " on group ", c.name(), ": ", role, " ", t.str(),
                " is larger than its storage");
  ZRT_CHECK_ARG(device_ok, op, " on group ", c.name(), ": the ", c.backend_name(),
                " backend does not move tensors on ", t.device().str(), " (", role, " ", t.str(),
                ")");
  ZRT_CHECK_ARG(stream.is_cpu() || stream.device() == t.device(), op, " on group ", c.name(),
                ": stream on ", stream.device().str(), " but ", role, " ", t.str(), " is on ",
                t.device().str());
  ZRT_CHECK_ARG(!stream.cpu_queue() || t.device().is_cpu(), op, " on group ", c.name(), ": ", role,
                " ", t.str(), " is on ", t.device().str(),
                " but the stream is an owned CPU stream");
}

// An input that shares memory with the output must be exactly this rank's
// chunk of it (the in-place form); any other overlap would read what it writes.
void check_chunk_alias(const Communicator& c, const char* op, const Tensor& whole,
                       const Tensor& chunk) {
  if (!whole.shares_storage(chunk) || whole.numel() == 0 || chunk.numel() == 0) return;
  const std::int64_t w0 = whole.offset(), w1 = w0 + whole.numel();
  const std::int64_t c0 = chunk.offset(), c1 = c0 + chunk.numel();
  if (c1 <= w0 || w1 <= c0) return;
  ZRT_CHECK_ARG(c0 == w0 + c.rank() * chunk.numel(), op, " on group ", c.name(), ": ", chunk.str(),
                " overlaps ", whole.str(),
                " but is not this rank's chunk of it (the only in-place form allowed)");
}

void check_same_dtype_device(const Communicator& c, const char* op, const Tensor& out,
                             const Tensor& in) {
  ZRT_CHECK_ARG(out.dtype() == in.dtype(), op, " on group ", c.name(), ": output ", out.str(),
                " and input ", in.str(), " have different dtypes");
  ZRT_CHECK_ARG(out.device() == in.device(), op, " on group ", c.name(), ": output ", out.str(),
                " and input ", in.str(), " are on different devices");
}

// A trace event for one collective, when the group has a tracer.
Tracer::Scope traced(const Communicator& c, const char* op, std::size_t bytes, std::uint64_t seq) {
  Tracer* t = c.tracer().get();
  return Tracer::Scope(t, t ? std::string(op) + " " + c.name() : std::string(), "comm",
                       Tracer::kCommTrack,
                       t ? std::map<std::string, double>{{"bytes", static_cast<double>(bytes)},
                                                         {"seq", static_cast<double>(seq)}}
                         : std::map<std::string, double>{});
}

// A tensor collective's contract: `t` is the tensor each rank passes (the
// input; all_reduce's and broadcast's only one).
CollectiveContract tensor_contract(CollectiveOp op, const Tensor& t, ReduceOp rop = ReduceOp::sum,
                                   int root = 0) {
  CollectiveContract c;
  c.op = op;
  c.numel = t.numel();
  c.dtype = t.dtype();
  c.reduce = rop;
  c.root = root;
  return c;
}

// What a collective reads and writes: the tensor itself when it runs now, the
// memory it has now when it is queued on a CPU stream (Note [CPU streams]).
Tensor in_order(const Tensor& t, Stream stream) { return stream.cpu_queue() ? t.issue_view() : t; }

}  // namespace

void Communicator::all_gather_into_tensor(const Tensor& out, const Tensor& in, Stream stream) {
  const char* op = "all_gather_into_tensor";
  check_tensor(*this, accepts_device(out.device()), op, "output", out, stream);
  check_tensor(*this, accepts_device(in.device()), op, "input", in, stream);
  check_same_dtype_device(*this, op, out, in);
  ZRT_CHECK_ARG(out.numel() == static_cast<std::int64_t>(size_) * in.numel(), op, " on group ",
                name_, ": output ", out.str(), " must have ", size_, " x ", in.numel(),
                " elements (group size x input)");
  check_chunk_alias(*this, op, out, in);
  issue({"all_gather", out.nbytes(), CollectiveKind::all_gather, out.numel(), out.itemsize(), 0,
         tensor_contract(CollectiveOp::all_gather, in), &out},
        stream, [this, o = in_order(out, stream), i = in_order(in, stream)](Stream s) {
          do_all_gather(o, i, s);
        });
}

void Communicator::reduce_scatter_tensor(const Tensor& out, const Tensor& in, ReduceOp rop,
                                         Stream stream) {
  const char* op = "reduce_scatter_tensor";
  check_tensor(*this, accepts_device(out.device()), op, "output", out, stream);
  check_tensor(*this, accepts_device(in.device()), op, "input", in, stream);
  check_same_dtype_device(*this, op, out, in);
  ZRT_CHECK_ARG(in.numel() == static_cast<std::int64_t>(size_) * out.numel(), op, " on group ",
                name_, ": input ", in.str(), " must have ", size_, " x ", out.numel(),
                " elements (group size x output)");
  ZRT_CHECK_ARG(rop == ReduceOp::sum || rop == ReduceOp::avg, op, " on group ", name_,
                ": reduce op ", reduce_op_name(rop), " is not supported (sum, avg)");
  check_chunk_alias(*this, op, in, out);
  issue({"reduce_scatter", in.nbytes(), CollectiveKind::reduce_scatter, in.numel(), in.itemsize(),
         0, tensor_contract(CollectiveOp::reduce_scatter, in, rop), &out},
        stream, [this, o = in_order(out, stream), i = in_order(in, stream), rop](Stream s) {
          do_reduce_scatter(o, i, rop, s);
        });
}

void Communicator::all_to_all(const Tensor& out, const Tensor& in, Stream stream) {
  const char* op = "all_to_all";
  check_tensor(*this, accepts_device(out.device()), op, "output", out, stream);
  check_tensor(*this, accepts_device(in.device()), op, "input", in, stream);
  check_same_dtype_device(*this, op, out, in);
  ZRT_CHECK_ARG(out.numel() == in.numel() && in.numel() % size_ == 0, op, " on group ", name_,
                ": input ", in.str(), " and output ", out.str(),
                " must have the same number of elements, a multiple of the group size ", size_);
  const std::int64_t o0 = out.offset(), i0 = in.offset();
  ZRT_CHECK_ARG(!out.shares_storage(in) || out.numel() == 0 || o0 + out.numel() <= i0 ||
                    i0 + in.numel() <= o0,
                op, " on group ", name_, ": output ", out.str(), " overlaps input ", in.str());
  issue({"all_to_all", in.nbytes(), CollectiveKind::all_to_all, in.numel(), in.itemsize(), 0,
         tensor_contract(CollectiveOp::all_to_all, in), &out},
        stream, [this, o = in_order(out, stream), i = in_order(in, stream)](Stream s) {
          do_all_to_all(o, i, s);
        });
}

void Communicator::all_reduce(const Tensor& t, ReduceOp rop, Stream stream) {
  const char* op = "all_reduce";
  check_tensor(*this, accepts_device(t.device()), op, "tensor", t, stream);
  ZRT_CHECK_ARG(
      rop == ReduceOp::sum || rop == ReduceOp::avg || rop == ReduceOp::max || rop == ReduceOp::min,
      op, " on group ", name_, ": unknown reduce op code ", static_cast<int>(rop));
  issue({"all_reduce", t.nbytes(), CollectiveKind::all_reduce, t.numel(), t.itemsize(), 0,
         tensor_contract(CollectiveOp::all_reduce, t, rop), &t},
        stream, [this, x = in_order(t, stream), rop](Stream s) { do_all_reduce(x, rop, s); });
}

void Communicator::broadcast(const Tensor& t, int root, Stream stream) {
  const char* op = "broadcast";
  check_tensor(*this, accepts_device(t.device()), op, "tensor", t, stream);
  ZRT_CHECK_ARG(root >= 0 && root < size_, op, " on group ", name_, ": root ", root,
                " is not a rank of this group of size ", size_);
  issue({"broadcast", t.nbytes(), CollectiveKind::broadcast, t.numel(), t.itemsize(), root,
         tensor_contract(CollectiveOp::broadcast, t, ReduceOp::sum, root), &t},
        stream, [this, x = in_order(t, stream), root](Stream s) { do_broadcast(x, root, s); });
}

void Communicator::abort(const std::string& why) noexcept {
  {
    std::lock_guard lock(abort_mu_);
    if (aborted_.load(std::memory_order_relaxed)) return;
    try {
      abort_reason_ = why;
    } catch (...) {  // out of memory for the message: aborting matters more
    }
    aborted_.store(true, std::memory_order_release);
  }
  do_abort(why);
}

std::string Communicator::abort_reason() const {
  std::lock_guard lock(abort_mu_);
  return abort_reason_;
}

void Communicator::wait_for_queued(const char* op) {
  if (!queued_.query()) {
    const std::string what =
        detail::concat(op, " waiting for the collectives queued before it on group ", name_);
    CommWatchdog(std::vector<Communicator*>{this})
        .wait_until([&] { return queued_.query(); }, what.c_str());
  }
  queued_.synchronize();  // complete: rethrows a failed stream's error
}

void Communicator::drain_queued() noexcept {
  try {
    queued_.synchronize();
  } catch (...) {  // the stream's own error, reported where it is waited on
  }
}

void Communicator::check_not_aborted(const char* op) const {
  if (!aborted()) return;
  ZRT_THROW(CommError, op, " #", seq_ + 1, " on group ", name_, " (rank ", rank_, " of ", size_,
            "): the group was aborted: ", abort_reason());
}

CollectiveContract Communicator::numbered(CollectiveContract c, std::uint64_t seq) const {
  c.seq = seq;
  flight_->copy_caller(c.caller);
  flight_->copy_subject(c.subject_id, c.subject);
  return c;
}

void Communicator::check_contracts(std::span<const CollectiveContract> by_rank) const {
  std::string mismatch = contract_mismatch(name_, by_rank);
  if (!mismatch.empty()) throw CommError(std::move(mismatch), __FILE__, __LINE__);
}

template <class F>
auto Communicator::on_calling_thread(CollectiveContract contract, F&& collective)
    -> decltype(collective()) {
  const char* op = collective_op_name(contract.op);
  check_not_aborted(op);
  wait_for_queued(op);
  running_seq_ = ++seq_;
  running_contract_ = numbered(contract, running_seq_);
  const std::uint64_t id = flight_->issued(op, name_, running_seq_, 0);
  flight_->started(id);
  try {
    if constexpr (std::is_void_v<decltype(collective())>) {
      collective();
      flight_->ended(id, true);
    } else {
      auto result = collective();
      flight_->ended(id, true);
      return result;
    }
  } catch (...) {
    flight_->ended(id, false);
    throw;
  }
}

void Communicator::set_link_model(const LinkModel& model) {
  check_link_model(model);
  link_ = model;
}

void Communicator::issue(const Issued& what, Stream stream,
                         std::function<void(Stream)> collective) {
  const char* trace_name = what.trace_name;
  const std::size_t bytes = what.bytes;
  check_not_aborted(trace_name);
  const std::uint64_t seq = ++seq_;
  const CollectiveContract contract = numbered(what.contract, seq);
  const std::uint64_t id = flight_->issued(trace_name, name_, seq, bytes);
  const LinkBytes link_bytes =
      ring_link_bytes(what.kind, what.numel, what.itemsize, size_, rank_, what.root);
  traffic_->add(what.kind, link_bytes);  // Note [Bytes on the link]
  // Copied at issue: the collective may run on another thread (Note [Link
  // model]). A group of one rank has no link.
  const LinkModel link = keeps_to_host() && size_ > 1 ? link_ : LinkModel{};
  auto run = [this, trace_name, bytes, stream, seq, contract, id, flight = flight_, link,
              link_bytes, collective = std::move(collective)] {
    running_seq_ = seq;
    running_contract_ = contract;
    flight->started(id);
    auto trace = traced(*this, trace_name, bytes, seq);
    try {
      const auto start = std::chrono::steady_clock::now();
      collective(stream);
      hold_for_link(link, start, std::max(link_bytes.sent, link_bytes.received),
                    [this] { return aborted(); });
    } catch (...) {
      flight->ended(id, false);
      throw;
    }
    flight->ended(id, true);
  };
  if (!stream.cpu_queue()) {
    wait_for_queued(trace_name);
    PhaseTimer::Scope timed(phase_timer_.get(), Phase::comm, stream);  // Note [Step phase times]
    run();
    return;
  }
  queued_.wait(stream);  // after this group's collectives queued on another stream
  {
    PhaseTimer::Scope timed(phase_timer_.get(), Phase::comm, stream);
    std::vector<std::shared_ptr<Storage>> written;
    if (what.written && what.written->storage_ptr()) written.push_back(what.written->storage_ptr());
    run_on_cpu_stream(stream, trace_name, std::move(run), std::move(written));
  }
  queued_.record(stream);
}

void Communicator::barrier() {
  on_calling_thread({.op = CollectiveOp::barrier}, [&] { do_barrier(); });
}

std::vector<std::vector<std::byte>> Communicator::all_gather_bytes(
    std::span<const std::byte> mine) {
  return on_calling_thread(
      {.numel = static_cast<std::int64_t>(mine.size()), .op = CollectiveOp::all_gather_bytes},
      [&] { return do_all_gather_bytes(mine); });
}

void Communicator::use_own_flight_recorder() { flight_ = std::make_shared<FlightRecorder>(rank_); }

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  return split(color, key, detail::concat(name_, "/split(", color, ")"));
}

std::unique_ptr<Communicator> Communicator::split(int color, int key, std::string child_name) {
  ZRT_CHECK_ARG(color >= 0, "split on group ", name_, ": color ", color, " must be >= 0");
  auto child = on_calling_thread({.op = CollectiveOp::split},
                                 [&] { return do_split(color, key, std::move(child_name)); });
  ZRT_CHECK_STATE(child != nullptr, "split on group ", name_, ": the ", backend_name(),
                  " backend returned no group");
  child->set_timeout(timeout_);
  child->timeout_from_environment_ = timeout_from_environment_;
  child->set_tracer(tracer_);
  child->set_phase_timer(phase_timer_);
  child->flight_ = flight_;  // one ring per rank
  child->traffic_ = traffic_;
  child->link_ = link_;
  return child;
}

}  // namespace zrt
