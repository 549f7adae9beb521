// The process groups of ZeRO-3 with a hierarchical (hpZ / LayerZero) zero3
// group, made from a world communicator of W ranks and a zero3 size Z that
// divides W:
//   zero1   all W ranks: optimizer states and gradients are sharded over it;
//   zero3   the Z ranks with equal rank / Z (e.g. one node): the parameter
//           shard kept between forward and backward lives here;
//   replica the W / Z ranks with equal rank % Z: the ranks holding the same
//           zero3 shard.
// Z = W is classic ZeRO-3 (FSDP FULL_SHARD); Z = 1 keeps whole parameters.
#pragma once

#include "zrt/runtime/comm/communicator.h"

namespace zrt {

// The groups a flat parameter handle talks to (optim/flat_param/
// sharding_groups.h says how each sharding strategy picks them).
struct ZeroGroups {
  CommPtr zero1;    // shards the fp32 state; reduce-scatters gradients
  CommPtr zero3;    // shards the compute-dtype copy; its size divides zero1's
  CommPtr replica;  // all-reduces gradient shards across replicas; null if none
};

// Collective over `world` (two splits). Throws InvalidArgument when
// zero3_size < 1 or does not divide world->size().
ZeroGroups make_zero_groups(const CommPtr& world, int zero3_size);

}  // namespace zrt
