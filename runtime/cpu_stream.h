// An owned CPU stream: an in-order queue of host tasks served by a thread of
// its own. Stream, OwnedStream and Event (stream.h) wrap it; kernels, tensor
// copies and collectives issued to such a stream run here.
//
// Note [CPU streams]
// ~~~~~~~~~~~~~~~~~~
// On CUDA a kernel or a collective issued to a stream runs later, in that
// stream's order, while the host goes on; only events order two streams.
// zrt's CPU streams behave the same, so that every ordering the GPU depends
// on is exercised by CPU tests:
//  - The default CPU stream (Stream{}) is the calling thread: work issued to
//    it is done when the call returns, as on CUDA's legacy stream everything
//    else must be ordered against.
//  - An owned CPU stream (OwnedStream(Device::cpu())) is a CpuStream: tasks
//    run one after another on its thread, in the order they were issued,
//    while the issuing thread goes on. A task captures the memory its
//    tensors have at issue time (Tensor::issue_view), as a CUDA launch
//    captures pointers, so freeing a buffer after issuing its last reader is
//    as legal as it is on CUDA: the caching allocator gives the block to the
//    same stream only, after that reader (Note [Explicit cross-stream
//    lifetimes]). Until the reader runs, its task holds the memory; an
//    allocation on the stream that would take new memory waits for the
//    queue first (Note [Allocations wait for their stream's frees]).
//  - An event recorded on it completes when the queue reaches the record;
//    a stream that waits for it runs a task that blocks until then; the
//    host waits in Event::synchronize and Stream::synchronize. A wait sees
//    the record issued before it, never a later one, as cudaStreamWaitEvent.
//  - The first task that throws fails the stream: later tasks are skipped
//    (event records still complete, carrying the failure), and every
//    synchronize, and every wait for one of its events, throws the error
//    again, prefixed with the operation that failed. A collective's own
//    timeout bounds how long a task can block; a host wait for a stream
//    that may hold one goes through the comm watchdog, which aborts a
//    collective blocked past its group's timeout (Note [Comm watchdog]).
//  - Work issued from the stream's own thread (a task that issues more) runs
//    inline: it is already in order.
//  - A task holds what it names, not its issuer: a collective queued on a
//    stream calls its group's communicator, so a communicator waits, first
//    thing in its destruction, for what its group queued (drain_queued).
//  - A discarding CPU stream (OwnedStream::discarding()) drops every task
//    and has no thread: event records complete at once, synchronize returns
//    at once. A dry run (Note [Dry runs] in model_zoo/trainer/memory_plan.h)
//    issues the whole step to such streams, so every allocation happens
//    and no kernel, copy or collective touches memory.
// The stream's thread starts with the issuing thread's setup (the kernel
// thread count, Note [Kernel threads per rank]) through the thread_init
// function its owner passes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace zrt {

class CpuStream {
 public:
  using Task = std::function<void()>;
  // Starts the stream's thread, which first runs `thread_init` (if any).
  explicit CpuStream(Task thread_init = {});
  // A discarding stream (Note [CPU streams]): no thread, no task ever runs
  // but those queued with enqueue_always, which run at once.
  struct Discarding {};
  explicit CpuStream(Discarding);
  bool discards() const { return discards_; }
  // Runs what is queued, then joins the thread. Never throws.
  ~CpuStream();
  CpuStream(const CpuStream&) = delete;
  CpuStream& operator=(const CpuStream&) = delete;

  // Queues `task`, named `op` in a failure's message. Once the stream has
  // failed, tasks are skipped. From the stream's own thread: runs it now.
  void enqueue(const char* op, Task task);
  // Queues `task` to run even after a failure (event records).
  void enqueue_always(Task task);
  // Blocks until every task issued so far has run; rethrows the failure, if
  // any. From the stream's own thread: returns at once.
  void synchronize();
  // Blocks until the next task has run and released what it captured:
  // true then; false at once when nothing is queued, or after `stall` with
  // no task finished, and from then at once until one finishes (a stuck
  // task is waited for once). Rethrows no failure (the next synchronize
  // does). From the thread of any CPU stream: false at once, since a task
  // must not wait for other tasks (Note [Allocations wait for their
  // stream's frees]).
  bool wait_for_a_task(std::chrono::milliseconds stall);
  // The failure (null when none) and the operation that raised it.
  std::exception_ptr failure() const;
  bool on_stream_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

  // Throws `failure` again with "<context>: " before its message, keeping
  // its zrt error type.
  [[noreturn]] static void rethrow(const std::exception_ptr& failure, const std::string& context);

 private:
  struct Item {
    const char* op;
    Task task;
    bool always;
  };
  void serve(Task thread_init);
  void push(Item item);

  mutable std::mutex mutex_;
  std::condition_variable work_;  // the thread waits for tasks
  std::condition_variable idle_;  // synchronize waits for the queue to drain
  std::deque<Item> queue_;
  std::uint64_t issued_ = 0, done_ = 0;
  std::uint64_t stalled_at_ = UINT64_MAX;  // done_ when wait_for_a_task last gave up
  bool stopping_ = false;
  std::exception_ptr failure_;
  bool discards_ = false;
  std::thread thread_;  // last: starts after every other member exists
};

}  // namespace zrt
