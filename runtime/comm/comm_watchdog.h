// The comm watchdog: how the host waits for work that may hold collectives,
// with a deadline, an eye on the backends' asynchronous errors, and an abort.
//
// Note [Comm watchdog]
// ~~~~~~~~~~~~~~~~~~~~
// A collective issued to a stream runs later (Note [Collective contract]).
// The host then waits for it: Stream::synchronize before reading a result,
// ZeroModule::synchronize before freeing memory queued work still reads. A
// backend's own timeouts only bound the waits inside the backend: an NCCL
// kernel spinning for a peer that never comes, or a CPU backend blocked in a
// call with no deadline, leaves a plain synchronize blocked forever, with no
// message. So the host never waits plainly for such work; it waits through
// a CommWatchdog over the groups the work may use:
//  - It polls a completion predicate (an event recorded on the stream:
//    cudaEventQuery on CUDA, the CPU stream's progress on the host) and each
//    group's Communicator::async_error() (NCCL: ncclCommGetAsyncError),
//    yielding between polls for the first 200 us, then sleeping from 20 us
//    up to 1 ms, so a short wait (the optimizer step's statistics, for
//    which the device idles until the host has read them) ends within a
//    poll of the event, not a timer's slack after it, and a long one costs
//    little CPU (a CPU stream's event is waited on
//    for up to 1 ms at a time instead, and wakes the host as it completes).
//  - The deadline is the groups' (largest) timeout() with no progress: it
//    starts when the wait starts and restarts whenever one of the rank's
//    collectives finishes (its flight recorder's count of ended entries), so
//    a wait over a long queue of collectives that all finish is not cut
//    short, and one collective that never finishes is caught one timeout
//    after the last progress, plus a grace (a tenth of it and 0.5 s) that
//    lets a backend's own timeout, which names the missing ranks, fire first
//    where it has one (the CPU backends). On CUDA the recorder counts an enqueued
//    collective as done (Note [Flight recorder]): there the deadline runs
//    from the start of the wait.
//  - Past the deadline, or on an asynchronous error, it aborts every watched
//    group (Communicator::abort: ncclCommAbort for NCCL; a CPU backend wakes
//    the collective blocked in it, which fails with CommError so the stream's
//    thread returns, and fails every later one) and throws CommError in the
//    shape of every CommError of a collective, "<op> #<seq> on group <name>
//    (rank r of n): ...". The collective named is the rank's oldest that did
//    not finish, from the flight recorder, on a watched group if one is
//    unfinished there; on CUDA, where no entry stays unfinished, the last one
//    issued on a watched group, said so.
//  - Every rank waits through its own watchdog, so every waiting rank raises
//    its own CommError about one timeout after it stalled; no rank needs a
//    message from another, which a hung peer could not send.
//  - When the work finishes first, the wait ends as a plain synchronize
//    would: a failed CPU stream's error is rethrown (Note [CPU streams]), so
//    a backend's own timeout, which names the missing ranks, is what the
//    caller sees when it fires first.
// The watchdog is a value on the waiting thread, naming the groups; nothing
// is global, so one process may hold several ranks, each with its own. A
// Communicator waits through one too, over its own group, before a
// collective that runs on the calling thread (barrier, split, any on the
// default stream) starts after those it queued on CPU streams.
#pragma once

#include <chrono>
#include <functional>
#include <vector>

#include "zrt/runtime/comm/communicator.h"
#include "zrt/runtime/stream.h"

namespace zrt {

// How long a wait over groups of `timeout` lasts with no progress: the
// timeout and a grace of a tenth of it and 0.5 s (Note [Comm watchdog]).
inline std::chrono::milliseconds watchdog_patience(std::chrono::milliseconds timeout) {
  return timeout + timeout / 10 + std::chrono::milliseconds(500);
}

class CommWatchdog {
 public:
  // Watches `groups`: those whose collectives the waited work may hold;
  // the caller keeps them alive while it waits. Null entries (a group a
  // configuration does not have) and repeats are skipped; InvalidArgument
  // when none is left.
  explicit CommWatchdog(const std::vector<Communicator*>& groups);
  explicit CommWatchdog(const std::vector<CommPtr>& groups);

  // Blocks until the work issued to `stream` so far is done, then rethrows
  // the stream's failure as Stream::synchronize does. `what` names the wait
  // in a timeout's message ("reading the gradient statistics").
  void synchronize(Stream stream, const char* what) const;
  // Blocks until `event`'s captured work is done, then rethrows a failure
  // as Event::synchronize does.
  void wait(const Event& event, const char* what) const;
  // Blocks until `done()` returns true: the general form for a caller with
  // its own completion test. `done` is called on this thread only. With
  // `done_blocks` the test itself blocks a while (up to the longest poll
  // interval, waking on completion) instead of the watchdog sleeping.
  void wait_until(const std::function<bool()>& done, const char* what,
                  bool done_blocks = false) const;

  // The longest timeout of the watched groups: the deadline without progress.
  std::chrono::milliseconds timeout() const;
  const std::vector<Communicator*>& groups() const { return groups_; }

 private:
  // Aborts every watched group and throws CommError naming the collective
  // the rank is stuck in; `why` says what ended the wait.
  [[noreturn]] void fail(const char* what, const std::string& why) const;
  // Collectives of the watched groups' flight recorders that ended so far.
  std::uint64_t progress() const;

  std::vector<Communicator*> groups_;
};

}  // namespace zrt
