// optim::FlatParamHandle checks written once against a world communicator, run on
// the local backend (unit) and under mpirun (mpi).
#pragma once

#include "zrt/optim/flat_param/sharding_strategy.h"
#include "zrt/runtime/comm/communicator.h"

namespace zrt::testing {

// flatten -> shard -> unshard gives every original parameter back bit for bit
// (fp32), and after the first reshard the zero3-group unshard matches.
void check_round_trip(const CommPtr& world, optim::ShardingStrategy strategy, int zero3_size,
                      DType param_dtype);

// With known per-rank gradients the zero1 gradient shard is the exact sum or
// average over ranks and micro-batches (with and without host offload), and
// the unsharded storage is released afterwards.
void check_gradient_path(const CommPtr& world, optim::ShardingStrategy strategy, int zero3_size,
                         ReduceOp op, int micro_batches, bool offload);

// One rank with a mis-shaped parameter: every rank throws an error naming it.
void check_mismatch_is_named(const CommPtr& world);

}  // namespace zrt::testing
