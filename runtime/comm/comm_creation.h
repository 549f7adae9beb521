// Waiting for a communicator that a non-blocking backend makes in the
// background: NCCL's ncclCommInitRankConfig and ncclCommSplit with
// ncclConfig_t blocking = 0. Written over any handle and result type so the
// rules below are tested on the CPU with a stand-in for NCCL
// (tests/runtime/comm/test_comm_creation.cpp); nccl_comm.cpp only plugs in
// ncclCommGetAsyncError.
//
// Note [Non-blocking communicator creation]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A non-blocking NCCL call that makes a communicator queues an asynchronous
// job. ncclCommInitRankConfig hands back the new handle at once and the
// job's progress is that handle's async error. ncclCommSplit does not: its
// job belongs to the PARENT, whose async error reads ncclInProgress while
// it runs (and which refuses other work meanwhile), and *newcomm stays NULL
// until the job ends. The call itself may return ncclSuccess as well as
// ncclInProgress before then (NCCL 2.28 does), so its return says nothing
// about the child. The rules, whatever the call returned:
//   1. a call that failed outright fails, and nothing is polled;
//   2. where the job has an owner (split: the parent), the owner is polled
//      until its async error is not ncclInProgress;
//   3. only then is the new handle read. NULL is the answer for a rank that
//      asked for no group (NCCL_SPLIT_NOCOLOR); for any other it is a
//      failure, never a communicator to use;
//   4. the new communicator is polled until its own async error is not
//      ncclInProgress (its initialisation may still run).
// One deadline bounds all the polling; past it the result is in_progress.
// On any failure the caller aborts what exists: the new handle if one came,
// and the owner, whose job may still run.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace zrt {

// Polls `poll` until it returns other than `in_progress` or `deadline`
// passes (then the last in_progress is returned). Polls at least once.
template <class Result, class Poll>
Result poll_while_in_progress(Result in_progress, Poll&& poll,
                              std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const Result rc = poll();
    if (rc != in_progress || std::chrono::steady_clock::now() > deadline) return rc;
    std::this_thread::yield();
  }
}

// How to watch one creation; Result values other than `success` and
// `in_progress` are failures.
template <class Handle, class Result>
struct CreationPolls {
  Result success;
  Result in_progress;
  // The async state of the job's owner; empty when the new handle tracks
  // its own job (init).
  std::function<Result()> owner;
  // The new handle as published so far (null until the job publishes it).
  std::function<Handle()> handle;
  // The new communicator's own async state.
  std::function<Result(Handle)> state;
};

template <class Handle, class Result>
struct Created {
  Handle handle{};       // what came, even on failure (for the caller to abort)
  Result result;         // success, in_progress (the deadline passed) or the failure
  bool missing = false;  // the job ended without the handle a group member needs
};

// Waits for a creation whose call returned `call` (Note [Non-blocking
// communicator creation]). `want_handle` is false for a rank that asked for
// no group. The result is success with a handle when the communicator is
// ready; success, no handle and not missing when no group was asked for.
template <class Handle, class Result>
Created<Handle, Result> await_creation(const CreationPolls<Handle, Result>& polls, Result call,
                                       bool want_handle,
                                       std::chrono::steady_clock::time_point deadline) {
  Created<Handle, Result> c{Handle{}, call, false};
  if (call != polls.success && call != polls.in_progress) {
    c.handle = polls.handle();
    return c;
  }
  if (polls.owner) {
    c.result = poll_while_in_progress(polls.in_progress, polls.owner, deadline);
    if (c.result != polls.success) {
      c.handle = polls.handle();
      return c;
    }
  }
  c.handle = polls.handle();
  if (!c.handle) {
    c.result = polls.success;
    c.missing = want_handle;
    return c;
  }
  c.result = poll_while_in_progress(
      polls.in_progress, [&] { return polls.state(c.handle); }, deadline);
  return c;
}

}  // namespace zrt
