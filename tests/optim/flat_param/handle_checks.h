// optim::FlatParamHandle checks written once against a world communicator, run on
// the local backend (unit) and under mpirun (mpi).
#pragma once

#include "zrt/optim/flat_param/flat_param_handle.h"
#include "zrt/optim/flat_param/sharding_strategy.h"
#include "zrt/runtime/comm/communicator.h"

namespace zrt::testing {

// flatten -> shard -> unshard gives every original parameter back bit for bit
// (fp32), and after the first reshard the zero3-group unshard matches.
void check_round_trip(const CommPtr& world, optim::ShardingStrategy strategy, int zero3_size,
                      DType param_dtype);

// With known per-rank gradients the zero1 gradient shard is the exact sum or
// average over ranks and micro-batches (with and without host offload), and
// the unsharded storage is released afterwards. With an int8 or int4
// reduce-scatter (Note [Quantized gradient reduce-scatter]) it is within the
// sum over ranks of half their blocks' scales of it (a float64 oracle of
// every rank's blocks).
void check_gradient_path(const CommPtr& world, optim::ShardingStrategy strategy, int zero3_size,
                         ReduceOp op, int micro_batches, bool offload,
                         optim::ReduceDType reduce = optim::ReduceDType::f32);

// With an int8 gather (Note [Quantized parameter gather]) every unsharded
// element is within half its block's scale of the master (a float64 oracle
// of the blocks of each zero1 chunk), the zero3 gather gives the same bits
// as the zero1 gather, a NaN in the master turns its block into NaN, and the
// fp32 master is untouched. A zero1 group of one gathers the exact values.
void check_quantized_gather(const CommPtr& world, optim::ShardingStrategy strategy, int zero3_size,
                            DType param_dtype);

// A gather over zero1 of a large parameter moves >= 3.5x fewer bytes a rank
// in int8 than in fp32 (>= 1.75x fewer than in bf16).
void check_quantized_gather_bytes(const CommPtr& world);

// One rank with a mis-shaped parameter: every rank throws an error naming it.
void check_mismatch_is_named(const CommPtr& world);

}  // namespace zrt::testing
