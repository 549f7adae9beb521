// What zrt-train checks before it allocates anything: the model's size from
// its definitions, whether its state can fit in this process's memory, and
// whether its outputs fit on their filesystems.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/train/train_options.h"

namespace zrt::train {

// The model's size, from its parameter definitions (nothing is allocated).
struct ModelSize {
  std::uint64_t params = 0;        // elements
  std::uint64_t largest_unit = 0;  // elements of the largest wrap unit
  std::uint64_t header = 8 + 64;   // bytes of a safetensors header of every parameter
};

ModelSize model_size(const TrainOptions& o);

// Throws ResourceError, with the numbers and what to change, when a CPU run's
// floor of memory (its state, one gathered unit, a micro-batch's logits, the
// data) exceeds what is available.
void check_memory_floor(const TrainOptions& o, const ModelSize& size);

// An output whose size is known before training.
struct PlannedOutput {
  std::string flag;  // "--save", "--checkpoint-dir"
  std::string path;  // the file, or the directory written into
  std::uint64_t bytes = 0;
};

// Throws ResourceError, naming the paths, the bytes needed and the bytes
// available, when the outputs that share a filesystem need more than its
// free space (statvfs, as an unprivileged user sees it). Streams (/dev/null, a FIFO)
// are left out.
void check_free_space(const std::vector<PlannedOutput>& outputs);

// --save's, --checkpoint-dir's and --offload-optimizer disk:DIR's sizes.
std::vector<PlannedOutput> planned_outputs(const TrainOptions& o, const ModelSize& size);

}  // namespace zrt::train
