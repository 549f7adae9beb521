// The fixed data order of training, identical for any number of ranks and
// micro-batches.
//
// Note [Data order]
// ~~~~~~~~~~~~~~~~~
// The global batch of step s is B sequences (gpt) or rows (mlp). Sequence j
// (0 ≤ j < B) starts at token ((s·B + j)·T) mod (len − T): inputs are the T
// tokens from there, targets the T tokens one further; len − T is the number
// of such windows. A file of N·T + 1 tokens (llm.c's layout) is read whole
// in its first N sequences. Where T and len share a factor, with g their
// gcd (that of T and len − T), starts are multiples of g and the last g − 1
// tokens are never a target (tail_never_a_target; zrt-train warns when that
// is 1% of the data). Row j of an mlp step
// is row (s·B + j) mod N. Rank r of W takes [r·B/W, (r+1)·B/W) and splits it
// into M micro-batches of B/(W·M), in order. Every micro-batch's normaliser
// is the global batch's target count (B·T or B), so summing the micro-batch
// gradients over ranks gives the gradient of the global-batch mean loss.
#pragma once

#include <cstdint>

#include "zrt/model_zoo/data/dataset.h"
#include "zrt/model_zoo/models/model.h"

namespace zrt::model_zoo {

struct BatchGeometry {
  std::int64_t batch = 0;    // B, global sequences/rows per step
  std::int64_t seq_len = 0;  // T (gpt only)
  int world = 1;             // W, data-parallel ranks
  int micro = 1;             // M, micro-batches per rank per step
};

// InvalidArgument naming the problem: non-positive sizes, B not divisible by
// W·M, or (tokens) T < 1 or a data set shorter than T + 1 tokens.
void check_batch_geometry(const Dataset& data, const BatchGeometry& g);

// The first token of sequence j of step s (Note [Data order]).
std::int64_t sequence_start(std::int64_t step, std::int64_t j, std::int64_t batch,
                            std::int64_t seq_len, std::int64_t data_len);
// How many of the last tokens of `data_len` no sequence of length
// `seq_len` ever has as a target (Note [Data order]).
std::int64_t tail_never_a_target(std::int64_t seq_len, std::int64_t data_len);

// Micro-batch m of rank r at step s, on `device` (Note [Data order]); gpt:
// inputs and targets i32 [B/(W·M), T]; mlp: inputs f32 [B/(W·M), d_in],
// targets i64 [B/(W·M)].
Batch make_micro_batch(const Dataset& data, std::int64_t step, const BatchGeometry& g, int rank,
                       int micro_index, Device device = Device::cpu());

// The same with the geometry spelled out: B, T, W, rank r, M, micro-batch m.
Batch make_micro_batch(const Dataset& data, std::int64_t step, std::int64_t batch,
                       std::int64_t seq_len, int world, int rank, int micro, int micro_index,
                       Device device = Device::cpu());

}  // namespace zrt::model_zoo
