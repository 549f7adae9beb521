// What zrt-ckpt does to a checkpoint without training: consolidate it into
// whole parameters, or rewrite it for another world size / strategy.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>

#include "zrt/optim/flat_param/sharding_strategy.h"
#include "zrt/runtime/tensor.h"

namespace zrt::optim {

// Every parameter of a checkpoint, whole, fp32 cpu, by its model name
// (Hugging Face GPT-2 names for gpt). Each tensor read is verified.
std::map<std::string, Tensor> consolidated_params(const std::string& checkpoint);

// Writes every parameter of `checkpoint` as consolidated_params gives it to
// the safetensors file `out` (the bytes write_safetensors would write),
// reading and writing one zero1 shard at a time, so that the process never
// holds the model (Note [Streamed saving]). A checkpoint that fails its
// checks part-way leaves no file. Returns the number of parameters and the
// step directory read (a root's `latest` may move while a run goes on).
// `between_shards`, when given, runs before each shard is read; what it
// throws stops the export, which then leaves no file either (a caller's
// way to stop on a signal).
struct Exported {
  std::size_t params = 0;
  std::string step_dir;
};
Exported export_params(const std::string& checkpoint, const std::string& out,
                       const std::function<void()>& between_shards = {});

// Writes `checkpoint` (a step or a root's latest) as the same step under
// `out_root`, laid out for `world` ranks under `strategy` (zero3_size: the
// group size of hybrid / layer-zero; 0 = world), as those ranks would have
// saved it. Returns the new step directory. `between_shards` as for
// export_params: what it throws leaves no step, not even step-N.tmp.
std::string reshard_checkpoint(const std::string& checkpoint, const std::string& out_root,
                               int world, optim::ShardingStrategy strategy, int zero3_size,
                               const std::function<void()>& between_shards = {});

}  // namespace zrt::optim
