// Proof that ranks which must hold equal data do: replicas of each zero1
// shard (hybrid, no-shard), and each zero3 shard against the cast of the
// zero1 masters it was cut from (zrt-train --check-consistency N).
//
// Note [Consistency check]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// Data that silently drifts (a bit flip in device memory, a rank that missed
// an update, a kernel that wrote out of bounds) trains on without a sign.
// Two redundancies in a ZeRO step let ranks prove agreement cheaply:
//  - Replicas: the ranks of a replica group hold the same zero1 shard. Each
//    hashes its fp32 master; the replica group exchanges the hashes. Where
//    they differ, the ranks whose hash most ranks share are taken as right and
//    the others are named (with two replicas, both are named).
//  - Zero3 shards: after a step's first reshard, rank r3 of a zero3 group
//    holds elements [r3·n3, (r3+1)·n3) of the compute-dtype parameter the
//    zero1 group gathered from the casts of its masters. The check hashes
//    with a position-aware sum, Σ mix(i, bits(x_i)) mod 2^64, which adds
//    over any partition of the elements: the zero1 group's sum over its
//    masters' casts and each zero3 group's sum over its shards must be
//    equal. With a quantized gather (Note [Quantized parameter gather]) the
//    casts are the masters' quantized chunks and the positions their bytes.
//    Only when they are not (or the masters differ in dtype bits) does the
//    check pay for a gather over zero1 like an unshard, which names the
//    ranks whose zero3 slice differs.
// Each collective is one small all_gather_bytes per group, and the host
// reads each shard once (a device copy on CUDA). The zero3 check applies
// where the zero3 shard is current: from the first reshard of a step to its
// optimizer update (the engine runs it there, before the update); a handle
// whose zero3 shard is the master itself, or is stale, is not checked. The
// findings, identical on every rank, name the handle, the ranks (in the
// world) and what differs; the caller decides to stop or warn.
#pragma once

#include <string>
#include <vector>

#include "zrt/optim/zero_module.h"

namespace zrt::optim {

// Collective over the module's world. Every inconsistency found, one line
// each, in the same order on every rank; empty when the ranks agree.
std::vector<std::string> check_consistency(const ZeroModule& module);

}  // namespace zrt::optim
