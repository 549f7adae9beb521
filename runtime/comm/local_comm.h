// The local backend: N ranks as threads of one process sharing memory. For
// tests, and for simulating N ranks on one CPU or one GPU (NCCL refuses two
// ranks on one GPU).
//
// Note [Local rendezvous]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A collective that moves data (all_gather, reduce_scatter, all_reduce,
// broadcast, all_gather_bytes) is two barriers of the group's shared state;
// barrier and split are one. At the first, every rank posts its arguments
// and where its buffers are, and the last to arrive checks that all posted
// the same collective (their contracts, Note [Collective contract]: a
// mismatch is one CommError that every rank throws before data moves) and
// sets up what the collective shares (split's new
// groups, the size of all_reduce's scratch buffer); a generation counter
// tells this barrier from the next one. Between the two barriers each rank
// writes only its own outputs (all_reduce: its share of the elements, into
// the scratch buffer), reading the others' inputs, so no locks are held
// while data moves. The second barrier makes sure nobody returns (and reuses
// its input) while another rank still reads it. What the last arriver set
// up stays valid until the rank's next barrier, so a rank reads it after it
// is released: split its placement, all_reduce its copy of the whole result
// from the scratch buffer. In a group of one rank all_gather and
// reduce_scatter only copy, and all_reduce and broadcast return at once.
// Every wait honours the timeout; a rank that times out marks the group
// broken with a message naming the ranks that never arrived, which wakes
// the other waiters at once and fails every later collective of the group.
// run_local_ranks fails every group of the world the same way when a rank
// throws (Note [Local ranks that fail]).
// CUDA tensors stay on the device: the ranks' streams wait for each other's
// events and copy or reduce (with the host path's arithmetic, Note
// [Deterministic reduction order]) without the host waiting (Note [Local
// collectives on the device] in local_comm.cpp).
#pragma once

#include <chrono>
#include <functional>
#include <vector>

#include "zrt/runtime/comm/communicator.h"

namespace zrt {

// The communicators of a new local group of `n` ranks named "world";
// communicator r is for the thread acting as rank r.
std::vector<CommPtr> make_local_world(int n,
                                      std::chrono::milliseconds timeout = default_comm_timeout());

// Runs fn(comm) on `n` threads, one per rank of a new local world, joins them
// all and rethrows the first exception a rank threw, if any; that failure
// fails the world's groups, so the other ranks stop at their next collective
// instead of waiting for the timeout. When the system refuses a thread (or
// its memory), the ranks already running are stopped and joined, and
// ResourceError names the rank count (Note [Local ranks that fail] in
// local_comm.cpp).
void run_local_ranks(int n, const std::function<void(const CommPtr&)>& fn,
                     std::chrono::milliseconds timeout = default_comm_timeout());

}  // namespace zrt
