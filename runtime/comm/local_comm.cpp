// See Note [Local rendezvous] in local_comm.h.
#include "zrt/runtime/comm/local_comm.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <new>
#include <numeric>
#include <optional>
#include <thread>

#include "zrt/runtime/comm/host_reduce.h"
#include "zrt/runtime/comm/host_staging.h"
#include "zrt/runtime/error.h"
#include "zrt/runtime/stream.h"
#ifdef ZRT_WITH_CUDA
#include <cuda_runtime.h>

#include "zrt/runtime/comm/device_reduce.h"
#include "zrt/runtime/cuda_check.h"
#endif

namespace zrt {

namespace {

// What a rank posts at a collective's first barrier; the others read it
// until the collective's last barrier.
struct Post {
  const char* op = "";            // for messages: the backend's name of the collective
  CollectiveContract contract{};  // Note [Collective contract]: from the running collective
  const std::byte* src = nullptr;
  std::span<const std::byte> bytes = {};
  int color = 0;
  int key = 0;
  // Note [Local collectives on the device]: the CUDA device the collective
  // runs on (-1: the host path).
  int device = -1;
};

class LocalGroup;

// Every group of one local world: the world and the groups split from it.
// Failing the family fails each of them, and every group split later.
class LocalFamily {
 public:
  void add(const std::shared_ptr<LocalGroup>& group);
  void abort(const std::string& why);
  // World rank `rank` returned from run_local_ranks' function (Note [Local
  // ranks that return early]): its groups' waits for it end.
  void rank_returned(int rank, const std::string& why);

 private:
  std::mutex mu_;
  std::string why_;
  std::vector<std::weak_ptr<LocalGroup>> groups_;
};

class LocalGroup {
 public:
  // `members`: the world rank of each rank of the group.
  LocalGroup(std::vector<int> members, std::shared_ptr<LocalFamily> family)
      : family_(std::move(family)),
        members_(std::move(members)),
        present_(members_.size(), 0),
        departed_(members_.size(), 0),
        posts_(members_.size()) {
#ifdef ZRT_WITH_CUDA
    ready_events.resize(members_.size());
    done_events.resize(members_.size());
#endif
  }

  static std::shared_ptr<LocalGroup> create(std::vector<int> members,
                                            const std::shared_ptr<LocalFamily>& family) {
    auto group = std::make_shared<LocalGroup>(std::move(members), family);
    family->add(group);
    return group;
  }
  const std::shared_ptr<LocalFamily>& family() const { return family_; }
  int world_rank(int rank) const { return members_[static_cast<std::size_t>(rank)]; }

  Post& post(int rank) { return posts_[rank]; }
  // Per-collective data the last arriver of the first barrier set up; valid
  // until this rank arrives at its next barrier.
  std::shared_ptr<void> shared;
  // The error every rank throws when the ranks did not post the same
  // collective; empty when they did.
  std::string disagreement;
  // all_reduce's result buffer, kept between calls (resized by the last
  // arriver, read by every rank before it arrives at its next barrier).
  std::vector<std::byte> scratch;
#ifdef ZRT_WITH_CUDA
  // Note [Local collectives on the device]: rank r's `ready` and `done`
  // events, slot r, recorded (and re-created) by rank r alone. The group
  // owns them, not the rank's communicator: every communicator of the group
  // keeps the group alive, so a rank whose communicator is gone (it left
  // the collective first, or failed) leaves its events to the slower ranks
  // still issuing waits on them.
  std::vector<std::optional<Event>> ready_events;
  std::vector<std::optional<Event>> done_events;
#endif

  // Blocks until every rank of the group has arrived at this barrier; the
  // last one to arrive runs `on_last` under the lock before releasing the
  // others. Throws CommError (prefixed by where()) on timeout or when the
  // group is broken.
  template <class Where>
  void arrive(int rank, std::chrono::milliseconds timeout, bool timeout_from_environment,
              const Where& where, const std::function<void()>& on_last = {}) {
    std::unique_lock lock(mu_);
    if (!broken_.empty()) ZRT_THROW(CommError, where(), ": the group failed earlier: ", broken_);
    const std::uint64_t gen = generation_;
    present_[rank] = 1;
    if (++arrived_ == static_cast<int>(present_.size())) {
      if (on_last) on_last();
      arrived_ = 0;
      std::fill(present_.begin(), present_.end(), 0);
      ++generation_;
      cv_.notify_all();
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    // A missing rank that returned from its function never arrives.
    auto gone = [&] {
      for (std::size_t r = 0; r < present_.size(); ++r)
        if (!present_[r] && departed_[r]) return true;
      return false;
    };
    const bool released = cv_.wait_until(
        lock, deadline, [&] { return generation_ != gen || !broken_.empty() || gone(); });
    if (released && generation_ != gen) return;
    if (released && broken_.empty()) {
      broken_ = detail::concat(where(), ": ", departed_why_,
                               " while this collective waited for it; every rank of a group "
                               "makes the same collectives (Note [Local ranks that return early])");
      cv_.notify_all();
      throw CommError(broken_, __FILE__, __LINE__);
    }
    if (!released) {
      std::string missing;
      for (std::size_t r = 0; r < present_.size(); ++r)
        if (!present_[r]) missing += detail::concat(missing.empty() ? "" : ", ", r);
      broken_ = detail::concat(where(), ": timed out after ", timeout.count(),
                               " ms waiting for rank(s) [", missing, "] (local backend; ",
                               timeout_from_environment
                                   ? "ZRT_COMM_TIMEOUT_S sets the limit)"
                                   : "the limit is the one the group was given: run_local_ranks, "
                                     "make_local_world or set_timeout)");
      cv_.notify_all();
      throw CommError(broken_, __FILE__, __LINE__);
    }
    ZRT_THROW(CommError, where(), ": the group failed while waiting: ", broken_);
  }

  // Fails the group from outside: ranks waiting in a collective throw at
  // once, and so does every later collective.
  void abort(const std::string& why) {
    std::lock_guard lock(mu_);
    if (broken_.empty()) broken_ = why;
    cv_.notify_all();
  }

  // World rank `rank` returned: a collective of this group waiting for it
  // now, or made later, fails with `why`.
  void rank_returned(int rank, const std::string& why) {
    std::lock_guard lock(mu_);
    for (std::size_t r = 0; r < members_.size(); ++r)
      if (members_[r] == rank && !departed_[r]) {
        departed_[r] = 1;
        if (departed_why_.empty()) departed_why_ = why;
      }
    cv_.notify_all();
  }

 private:
  std::shared_ptr<LocalFamily> family_;
  std::vector<int> members_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t generation_ = 0;
  int arrived_ = 0;
  std::vector<char> present_;
  std::vector<char> departed_;  // per rank: returned from its function
  std::string departed_why_;    // the first departure's, for messages
  std::string broken_;
  std::vector<Post> posts_;
};

// abort() takes group locks only after releasing the family's: a group's
// last arriver adds the groups it splits while holding its own lock. A group
// added after an abort is failed before any rank can see it.
void LocalFamily::add(const std::shared_ptr<LocalGroup>& group) {
  std::lock_guard lock(mu_);
  std::erase_if(groups_, [](const std::weak_ptr<LocalGroup>& g) { return g.expired(); });
  groups_.push_back(group);
  if (!why_.empty()) group->abort(why_);
}

void LocalFamily::abort(const std::string& why) {
  std::vector<std::shared_ptr<LocalGroup>> groups;
  {
    std::lock_guard lock(mu_);
    if (why_.empty()) why_ = why;
    for (const auto& g : groups_)
      if (auto live = g.lock()) groups.push_back(std::move(live));
  }
  for (const auto& g : groups) g->abort(why);
}

void LocalFamily::rank_returned(int rank, const std::string& why) {
  std::vector<std::shared_ptr<LocalGroup>> groups;
  {
    std::lock_guard lock(mu_);
    for (const auto& g : groups_)
      if (auto live = g.lock()) groups.push_back(std::move(live));
  }
  for (const auto& g : groups) g->rank_returned(rank, why);
}

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(int rank, int size, std::string name, std::shared_ptr<LocalGroup> group)
      : Communicator(rank, size, std::move(name)), group_(std::move(group)) {}
  ~LocalCommunicator() override { drain_queued(); }

  const char* backend_name() const override { return "local"; }

 protected:
  bool accepts_device(Device) const override { return true; }

  void do_all_gather(const Tensor& out, const Tensor& in, Stream stream) override {
    if (size() == 1) {
      if (!out.shares_storage(in) || out.offset() != in.offset()) Tensor(out).copy_(in, stream);
      return;
    }
#ifdef ZRT_WITH_CUDA
    if (auto s = device_stream(in, stream)) return device_all_gather(out, in, *s, stream.is_cpu());
#endif
    Tensor hin = host_input(in, stream), hout = host_output(out);
    const auto n = static_cast<std::size_t>(in.nbytes());
    post_and_arrive({.op = "all_gather_into_tensor", .src = bytes_of(hin)});
    std::byte* dst = mutable_bytes_of(hout);
    for (int r = 0; r < size() && n > 0; ++r) {
      const std::byte* src = group_->post(r).src;
      if (dst + r * n != src) std::memcpy(dst + r * n, src, n);
    }
    depart("all_gather_into_tensor");
    finish_output(out, hout, stream);
  }

  void do_all_to_all(const Tensor& out, const Tensor& in, Stream stream) override {
    if (size() == 1) {
      Tensor(out).copy_(in, stream);
      return;
    }
#ifdef ZRT_WITH_CUDA
    if (auto s = device_stream(in, stream)) return device_all_to_all(out, in, *s, stream.is_cpu());
#endif
    Tensor hin = host_input(in, stream), hout = host_output(out);
    const auto n = static_cast<std::size_t>(in.nbytes()) / static_cast<std::size_t>(size());
    post_and_arrive({.op = "all_to_all", .src = bytes_of(hin)});
    std::byte* dst = mutable_bytes_of(hout);
    for (int r = 0; r < size() && n > 0; ++r)
      std::memcpy(dst + r * n, group_->post(r).src + rank() * n, n);
    depart("all_to_all");
    finish_output(out, hout, stream);
  }

  void do_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op, Stream stream) override {
    if (size() == 1) {
      if (!out.shares_storage(in) || out.offset() != in.offset()) Tensor(out).copy_(in, stream);
      return;
    }
#ifdef ZRT_WITH_CUDA
    if (auto s = device_stream(in, stream))
      return device_reduce_scatter(out, in, op, *s, stream.is_cpu());
#endif
    Tensor hin = host_input(in, stream), hout = host_output(out);
    post_and_arrive({.op = "reduce_scatter_tensor", .src = bytes_of(hin)});
    const std::size_t chunk = out.nbytes() * static_cast<std::size_t>(rank());
    reduce_from_posts(mutable_bytes_of(hout), chunk, out.numel(), out.dtype(), op);
    depart("reduce_scatter_tensor");
    finish_output(out, hout, stream);
  }

  void do_all_reduce(const Tensor& t, ReduceOp op, Stream stream) override {
    if (size() == 1) return;  // the sum, max, min and avg of one value is itself
#ifdef ZRT_WITH_CUDA
    if (auto s = device_stream(t, stream)) return device_all_reduce(t, op, *s, stream.is_cpu());
#endif
    Tensor h = host_input(t, stream);
    const std::size_t nbytes = t.nbytes();
    // Each rank reduces its share of the elements into a shared scratch
    // buffer; after the second barrier every rank copies the whole result.
    post_and_arrive({.op = "all_reduce", .src = bytes_of(h)},
                    [&] { group_->scratch.resize(nbytes); });
    std::byte* scratch = group_->scratch.data();
    const std::int64_t per = (t.numel() + size() - 1) / size();
    const std::int64_t begin = std::min<std::int64_t>(per * rank(), t.numel());
    const std::int64_t count = std::min<std::int64_t>(per, t.numel() - begin);
    const std::size_t offset = static_cast<std::size_t>(begin) * t.itemsize();
    reduce_from_posts(scratch + offset, offset, count, t.dtype(), op);
    depart("all_reduce");
    if (nbytes > 0) std::memcpy(mutable_bytes_of(h), scratch, nbytes);
    finish_output(t, h, stream);
  }

  void do_broadcast(const Tensor& t, int root, Stream stream) override {
    if (size() == 1) return;
#ifdef ZRT_WITH_CUDA
    if (auto s = device_stream(t, stream)) return device_broadcast(t, root, *s, stream.is_cpu());
#endif
    Tensor h = host_input(t, stream);
    post_and_arrive({.op = "broadcast", .src = bytes_of(h)});
    if (rank() != root && t.numel() > 0)
      std::memcpy(mutable_bytes_of(h), group_->post(root).src, t.nbytes());
    depart("broadcast");
    if (rank() != root) finish_output(t, h, stream);
  }

  void do_barrier() override { post_and_arrive({.op = "barrier"}); }

  // Wakes this rank's collective blocked in the group and every other
  // rank's: they throw CommError naming `why`, and so does every later one.
  void do_abort(const std::string& why) noexcept override {
    try {
      group_->abort(why);
    } catch (const std::exception& e) {
      report_in_destructor("LocalCommunicator::abort", e);  // out of memory for the message
    }
  }

  std::vector<std::vector<std::byte>> do_all_gather_bytes(
      std::span<const std::byte> mine) override {
    post_and_arrive({.op = "all_gather_bytes", .bytes = mine});
    std::vector<std::vector<std::byte>> all(size());
    for (int r = 0; r < size(); ++r) {
      auto b = group_->post(r).bytes;
      all[r].assign(b.begin(), b.end());
    }
    depart("all_gather_bytes");
    return all;
  }

  std::unique_ptr<Communicator> do_split(int color, int key, std::string child_name) override {
    // The last arriver forms the groups: ranks of equal color, ordered by (key, rank).
    struct Placement {
      std::shared_ptr<LocalGroup> group;
      int rank = 0;
      int size = 0;
    };
    using Placements = std::vector<Placement>;
    post_and_arrive({.op = "split", .color = color, .key = key}, [&] {
      std::map<int, std::vector<std::pair<int, int>>> members;  // color -> (key, rank)
      for (int r = 0; r < size(); ++r)
        members[group_->post(r).color].emplace_back(group_->post(r).key, r);
      auto placements = std::make_shared<Placements>(size());
      for (auto& [c, list] : members) {
        std::sort(list.begin(), list.end());
        std::vector<int> world_ranks;
        for (const auto& [key, r] : list) world_ranks.push_back(group_->world_rank(r));
        auto g = LocalGroup::create(std::move(world_ranks), group_->family());
        for (std::size_t i = 0; i < list.size(); ++i)
          (*placements)[list[i].second] = {g, static_cast<int>(i), static_cast<int>(list.size())};
      }
      group_->shared = placements;
    });
    Placement mine = (*std::static_pointer_cast<Placements>(group_->shared))[rank()];
    return std::make_unique<LocalCommunicator>(mine.rank, mine.size, std::move(child_name),
                                               std::move(mine.group));
  }

 private:
  // Posts this rank's arguments, waits for every rank, and checks that all of
  // them entered the same collective with the same sizes. The last arriver
  // compares the posts (a fast rank may overwrite its post for the next
  // collective as soon as it is released), and every rank throws alike.
  void post_and_arrive(Post p, const std::function<void()>& on_last = {}) {
    p.contract = running_contract();
    const char* op = p.op;
    group_->post(rank()) = p;
    group_->arrive(
        rank(), timeout(), timeout_from_environment(), [&] { return where(op); },
        [&] {
          group_->disagreement = find_disagreement();
          if (group_->disagreement.empty() && on_last) on_last();
        });
    if (!group_->disagreement.empty()) throw CommError(group_->disagreement, __FILE__, __LINE__);
  }

  std::string find_disagreement() {
    std::vector<CollectiveContract> contracts;
    contracts.reserve(static_cast<std::size_t>(size()));
    for (int r = 0; r < size(); ++r) contracts.push_back(group_->post(r).contract);
    std::string mismatch = contract_mismatch(name(), contracts);
    if (!mismatch.empty()) return mismatch;
    const Post& first = group_->post(0);
    for (int r = 1; r < size(); ++r) {
      const Post& other = group_->post(r);
      if ((other.device < 0) != (first.device < 0))
        return detail::concat(collective_op_name(first.contract.op), " #", first.contract.seq,
                              " of group '", name(), "': rank 0 runs it on ",
                              first.device < 0 ? "the host" : "a CUDA device", ", rank ", r, " on ",
                              other.device < 0 ? "the host" : "a CUDA device",
                              "; every rank must pass its tensors on the same kind of device");
    }
    return {};
  }

  // The barrier after which no rank reads another's posted buffers.
  void depart(const char* op) {
    group_->arrive(rank(), timeout(), timeout_from_environment(), [&] { return where(op); });
  }

  // dst = reduction over ranks of (posted src + byte_offset), `count` elements.
  void reduce_from_posts(std::byte* dst, std::size_t byte_offset, std::int64_t count, DType dtype,
                         ReduceOp op) {
    if (count <= 0) return;
    std::vector<const void*> srcs(size());
    for (int r = 0; r < size(); ++r) srcs[r] = group_->post(r).src + byte_offset;
    host_reduce(dst, srcs, count, dtype, op);
  }

#ifdef ZRT_WITH_CUDA
  // Note [Local collectives on the device]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // Staging CUDA tensors through host memory made every collective a host
  // wait for the rank's stream, a pageable copy down, a CPU reduction and a
  // copy up: two local ranks on one GPU trained at a sixth of one rank's
  // speed. Thread ranks share one address space, so the device reads the
  // other ranks' buffers itself and the host only orders the work:
  //  - Before the first barrier a rank records `ready` on its stream (its
  //    input is written), and posts its buffer's address.
  //  - After it, its stream waits for every other rank's `ready`, then gets
  //    the copies (cudaMemcpyAsync, peer copies between GPUs included) or
  //    the reduction (device_reduce: host_reduce's arithmetic, so the bits
  //    match the host path, in launches of at most 16 inputs, Note [Device
  //    reductions in batches] in device_reduce.h), and `done` is recorded
  //    after them. A NaN result is NaN on both, but its bits may differ:
  //    x86 arithmetic keeps a NaN operand's sign and payload, CUDA's gives
  //    its one canonical NaN.
  //  - After the second barrier its stream waits for every other rank's
  //    `done`, so nothing it runs later overwrites its input while another
  //    rank's stream still reads it.
  // Nothing waits on the host: the rank's thread goes on issuing work. An
  // input on another GPU is copied over before a reduction reads it;
  // all_reduce reduces into a scratch tensor and copies it into place once
  // every rank has read the original. The events are the group's (one slot
  // per rank, LocalGroup::ready_events and done_events), not the rank's
  // communicator's: a rank released from the second barrier may destroy its
  // communicator (the ZeRO groups split per rank thread) while a slower
  // rank has yet to issue its waits on that rank's `done`. A rank records
  // `ready` again only before its next first barrier and `done` only after
  // it, by when every other rank has issued its waits on the previous
  // record; so re-creating an event for another device is safe there too.
  // A rank that fails after the first barrier drains its stream before it
  // throws (device_collective). With the (default) CPU stream the
  // collective runs on the device's legacy default stream and the host
  // waits for it, as that stream's callers expect their results on return.
  //
  // Memory --plan does not see: a dry run plans CUDA runs on CPU streams, so
  // the device path's buffers are not in the plan (Note [Dry runs] in
  // model_zoo/trainer/memory_plan.h). all_reduce takes a scratch tensor of
  // the whole tensor's size per rank (the host path's one shared buffer is
  // host memory), a reduction takes one copy of the reduced elements per
  // input on another GPU, and reduce_scatter one of its output where the
  // output is its own input chunk past the first 16 ranks; each lives from
  // the collective's issue until its stream has run it.

  // The CUDA stream a collective on `t` runs in, or none for the host path.
  static std::optional<Stream> device_stream(const Tensor& t, Stream s) {
    if (!t.device().is_cuda() || s.cpu_queue() != nullptr) return std::nullopt;
    if (s.is_cpu()) return Stream::cuda(t.device().index, nullptr);
    if (s.device() != t.device()) return std::nullopt;
    return s;
  }

  // This rank's event in slot `e` of the group, re-created when the
  // collective's device changes.
  static Event& event(std::optional<Event>& e, Device device) {
    if (!e || e->device() != device) e.emplace(device);
    return *e;
  }

  void copy_bytes(std::byte* dst, const std::byte* src, std::size_t n, Stream s) {
    if (n == 0 || dst == src) return;
    CudaDeviceGuard guard(s.device().index);
    ZRT_CUDA_CHECK(
        cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, static_cast<cudaStream_t>(s.native())));
  }

  // `s` waits for every other rank's event in `slots`. A slot is empty only
  // when its rank reached this barrier from something other than a device
  // collective (it went on after failing in one): the group is out of step.
  void wait_for_others(const std::vector<std::optional<Event>>& slots, Stream s, const char* op) {
    for (int r = 0; r < size(); ++r) {
      if (r == rank()) continue;
      if (!slots[r])
        ZRT_THROW(CommError, where(op), ": rank ", r,
                  " is out of step (it left an earlier collective part-way)");
      slots[r]->wait(s);
    }
  }

  // One collective on `s`: `ready` and the first barrier; `s` waiting for
  // every other rank's input; `body` (this rank's copies or reduction);
  // `done`, the second barrier and `s` waiting for every other rank's reads.
  // A failure once the first barrier has passed (a refused allocation or a
  // failed launch in `body`, the second barrier's timeout) may leave reads
  // of the other ranks' buffers queued on `s` that nothing orders before
  // their owners reuse them: the host waits for `s` to drain before the
  // failure propagates (its own failure, if any, is the lesser news).
  template <class Body>
  void device_collective(Post p, Stream s, const Body& body) {
    const char* op = p.op;
    event(group_->ready_events[rank()], s.device()).record(s);
    p.device = s.device().index;
    post_and_arrive(p);
    try {
      wait_for_others(group_->ready_events, s, op);
      body();
      event(group_->done_events[rank()], s.device()).record(s);
      depart(op);
      wait_for_others(group_->done_events, s, op);
    } catch (...) {
      try {
        s.synchronize();
      } catch (...) {  // NOLINT(bugprone-empty-catch): the first failure is rethrown
      }
      throw;
    }
  }

  // dst = reduction over ranks of (posted src + byte_offset), on `s`.
  void device_reduce_posts(std::byte* dst, std::size_t byte_offset, std::int64_t count, DType dtype,
                           ReduceOp op, Stream s, const AllocatorPtr& memory) {
    if (count <= 0) return;
    std::vector<const void*> srcs(static_cast<std::size_t>(size()));
    std::vector<Tensor> copies;  // inputs from other GPUs, copied here first
    for (int r = 0; r < size(); ++r) {
      const std::byte* src = group_->post(r).src + byte_offset;
      if (group_->post(r).device != s.device().index) {
        copies.push_back(Tensor::empty({count}, dtype, s.device(), memory, s));
        copy_bytes(mutable_bytes_of(copies.back()), src, copies.back().nbytes(), s);
        src = bytes_of(copies.back());
      }
      srcs[r] = src;
    }
    // Note [Device reductions in batches]: a launch after the first reads
    // its inputs after dst has been written, so an output that is one of
    // those inputs (reduce_scatter's chunk of a rank past the first launch's)
    // is reduced into a scratch tensor and copied over.
    const auto first = static_cast<std::ptrdiff_t>(std::min(srcs.size(), kMaxDeviceReduceInputs));
    const bool aliased =
        std::find(srcs.begin() + first, srcs.end(), static_cast<const void*>(dst)) != srcs.end();
    Tensor scratch = aliased ? Tensor::empty({count}, dtype, s.device(), memory, s) : Tensor();
    std::byte* out = aliased ? mutable_bytes_of(scratch) : dst;
    {
      CudaDeviceGuard guard(s.device().index);
      device_reduce(out, srcs, count, dtype, op, s.native());
    }
    if (aliased) copy_bytes(dst, out, scratch.nbytes(), s);
  }

  static void finish_device(Stream s, bool host_waits) {
    if (host_waits) s.synchronize();
  }

  void device_all_gather(const Tensor& out, const Tensor& in, Stream s, bool host_waits) {
    const auto n = static_cast<std::size_t>(in.nbytes());
    std::byte* dst = mutable_bytes_of(out);
    device_collective({.op = "all_gather_into_tensor", .src = bytes_of(in)}, s, [&] {
      for (int r = 0; r < size() && n > 0; ++r)  // in place: no self-copy
        if (dst + r * n != group_->post(r).src) copy_bytes(dst + r * n, group_->post(r).src, n, s);
    });
    finish_device(s, host_waits);
  }

  void device_all_to_all(const Tensor& out, const Tensor& in, Stream s, bool host_waits) {
    const auto n = static_cast<std::size_t>(in.nbytes()) / static_cast<std::size_t>(size());
    std::byte* dst = mutable_bytes_of(out);
    device_collective({.op = "all_to_all", .src = bytes_of(in)}, s, [&] {
      for (int r = 0; r < size() && n > 0; ++r)
        copy_bytes(dst + r * n, group_->post(r).src + rank() * n, n, s);
    });
    finish_device(s, host_waits);
  }

  void device_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op, Stream s,
                             bool host_waits) {
    device_collective({.op = "reduce_scatter_tensor", .src = bytes_of(in)}, s, [&] {
      // Only this rank reads its own chunk of `in`, so `out` may be that chunk.
      const std::size_t chunk = out.nbytes() * static_cast<std::size_t>(rank());
      device_reduce_posts(mutable_bytes_of(out), chunk, out.numel(), out.dtype(), op, s,
                          out.storage().allocator());
    });
    finish_device(s, host_waits);
  }

  void device_all_reduce(const Tensor& t, ReduceOp op, Stream s, bool host_waits) {
    // The result waits in `sum` until every rank has read `t`.
    Tensor sum;
    device_collective({.op = "all_reduce", .src = bytes_of(t)}, s, [&] {
      sum = Tensor::empty({t.numel()}, t.dtype(), t.device(), t.storage().allocator(), s);
      device_reduce_posts(mutable_bytes_of(sum), 0, t.numel(), t.dtype(), op, s,
                          t.storage().allocator());
    });
    copy_bytes(mutable_bytes_of(t), bytes_of(sum), t.nbytes(), s);
    finish_device(s, host_waits);
  }

  void device_broadcast(const Tensor& t, int root, Stream s, bool host_waits) {
    device_collective({.op = "broadcast", .src = bytes_of(t)}, s, [&] {
      if (rank() != root) copy_bytes(mutable_bytes_of(t), group_->post(root).src, t.nbytes(), s);
    });
    finish_device(s, host_waits);
  }
#endif

  std::shared_ptr<LocalGroup> group_;
};

}  // namespace

namespace {

std::vector<CommPtr> local_world(int n, std::chrono::milliseconds timeout,
                                 std::shared_ptr<LocalGroup>& group) {
  ZRT_CHECK_ARG(n >= 1, "make_local_world: the world needs at least one rank, got ", n);
  ZRT_CHECK_ARG(timeout.count() > 0,
                "make_local_world: the collective timeout must be positive, got ", timeout.count(),
                " ms");
  std::vector<int> ranks(static_cast<std::size_t>(n));
  std::iota(ranks.begin(), ranks.end(), 0);
  group = LocalGroup::create(std::move(ranks), std::make_shared<LocalFamily>());
  const LinkModel link = link_model_from_env();  // Note [Link model]
  std::vector<CommPtr> comms;
  comms.reserve(n);
  for (int r = 0; r < n; ++r) {
    comms.push_back(std::make_shared<LocalCommunicator>(r, n, "world", group));
    // The environment's default stays named as such in timeout messages.
    if (timeout != default_comm_timeout()) comms.back()->set_timeout(timeout);
    comms.back()->set_link_model(link);
  }
  return comms;
}

}  // namespace

std::vector<CommPtr> make_local_world(int n, std::chrono::milliseconds timeout) {
  std::shared_ptr<LocalGroup> group;
  return local_world(n, timeout, group);
}

void run_local_ranks(int n, const std::function<void(const CommPtr&)>& fn,
                     std::chrono::milliseconds timeout) {
  // Note [Local ranks that fail]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // A rank whose fn throws will never arrive at its next collective, and the
  // ranks waiting there would wait for the whole timeout (300 s by default).
  // Instead the first failure fails every group of the world (the world and
  // the groups split from it): the others throw CommError at once, naming
  // the failed rank, and the caller gets the first failure, the cause.
  // Starting the ranks may fail the same way part-way through: the system
  // refuses a thread (std::system_error: the process's thread limit,
  // `ulimit -u`) or the memory for one (std::bad_alloc). The ranks already
  // running are stopped alike and joined, and the caller gets a
  // ResourceError naming the rank count, not std::terminate from a joinable
  // std::thread.
  //
  // Note [Local ranks that return early]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // A rank whose fn returns (an early `return` on one rank, a loop that runs
  // one step fewer there) will not arrive either, and the others waited the
  // whole timeout to learn it, blaming the rank by the timeout's message.
  // So a rank that returns departs its groups: a collective of a group that
  // holds it, waiting now or made later, throws CommError at once, naming
  // the rank that returned. Groups without it go on (a split of the others
  // finishes its own collectives). This asks of fn what run_local_ranks
  // asks anyway: a rank's streams, modules and savers live inside its fn,
  // so its collectives have all finished when it returns (their owners
  // drain them), and a departure never fails a collective the rank took
  // part in. One queued on a stream kept outside fn would be failed.
  std::shared_ptr<LocalGroup> world;
  std::vector<CommPtr> comms;
  std::vector<std::thread> threads;
  try {
    comms = local_world(n, timeout, world);
    threads.reserve(n);
  } catch (const std::bad_alloc&) {
    ZRT_THROW(ResourceError, "starting ", n, " local ranks: out of memory for their communicators");
  }
  std::mutex first_mu;
  std::exception_ptr first;  // the first failure, in time
  auto fail = [&](std::exception_ptr e, const std::string& why) {
    {
      std::lock_guard lock(first_mu);
      if (!first) first = std::move(e);
    }
    world->family()->abort(why);
  };
  for (int r = 0; r < n; ++r) {
    try {
      threads.emplace_back([&, r] {
        try {
          fn(comms[r]);
          world->family()->rank_returned(
              r, detail::concat("world rank ", r, " returned from its run_local_ranks function"));
        } catch (const std::exception& e) {
          fail(std::current_exception(), detail::concat("rank ", r, " failed: ", e.what()));
        } catch (...) {
          fail(std::current_exception(), detail::concat("rank ", r, " failed"));
        }
      });
    } catch (const std::exception& e) {  // std::system_error or std::bad_alloc
      const std::string why =
          detail::concat("starting ", n, " local ranks: the system refused the thread of rank ", r,
                         " (", e.what(), "); the ", r,
                         " rank(s) already started were stopped. Run fewer ranks, raise the "
                         "process's thread limit (ulimit -u), "
                         "or launch processes with mpirun");
      fail(std::make_exception_ptr(ResourceError(why, __FILE__, __LINE__)), why);
      break;
    }
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace zrt
