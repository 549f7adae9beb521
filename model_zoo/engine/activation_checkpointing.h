// Which of a model's blocks the engine checkpoints: none, every block, or one
// block in N.
//
// Note [Activation checkpointing]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A checkpointed block (a stage in Model::block_stages()) keeps only its
// input through the forward pass: right after its forward the engine drops
// what its layers cached for backward (Model::release_stage). In backward,
// inside the block's backward scope (its unit is gathered for the backward
// anyway, over the zero3 group as every later unshard of a step: Note [Zero1
// and zero3 shards]), the engine runs the block's forward again from the kept
// input, then its backward. The forward is deterministic (no dropout; the same
// kernels on the same inputs and parameters), so the step is bit-identical to
// one without checkpointing, for every strategy, dtype and micro-batch count.
// What it saves: per checkpointed block, its layers' caches minus its input
// (for GPT about 15 [B, T, C] tensors of 16); what it costs: one more block
// forward in backward, about a third more compute. "every:N" checkpoints
// blocks 0, N, 2N, ... (every:1 = blocks): the caches of the others stay.
#pragma once

#include <string>

namespace zrt::model_zoo {

struct ActivationCheckpointing {
  int every = 0;  // 0: no block; 1: every block; N: blocks 0, N, 2N, ...

  bool enabled() const { return every > 0; }
  // Whether block number `block` (its index in Model::block_stages()) is checkpointed.
  bool checkpoints(int block) const { return every > 0 && block % every == 0; }
  // "none", "blocks" or "every:N".
  std::string str() const;
};

// Parses "none", "blocks" or "every:N" (N >= 1); InvalidArgument names a bad value.
ActivationCheckpointing parse_activation_checkpointing(const std::string& text);

}  // namespace zrt::model_zoo
