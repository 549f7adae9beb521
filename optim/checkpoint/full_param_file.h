// The whole model of a ZeroModule written to one safetensors file, a chunk
// at a time (Note [Streamed saving] in zrt/runtime/io/safetensors_writer.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "zrt/optim/zero_module.h"

namespace zrt::optim {

// At most this many fp32 elements of a unit are gathered at once (16 MiB,
// whatever the model's size): the fixed memory a save adds to a rank.
inline constexpr std::int64_t kSaveChunkElements = std::int64_t(4) << 20;

// Collective over module.world(): writes every parameter of `module` in fp32
// under full_params()'s names to the safetensors file `path` (the bytes
// write_safetensors(path, module.full_params()) gives), rank 0 writing each
// gathered chunk where it belongs. Every rank throws the same error:
// ResourceError naming `what` and the first parameter (in name order) that
// holds NaN or Inf, before any file exists; a failed write on rank 0 (no
// file is left). Returns the number of parameters written.
std::size_t save_full_params(ZeroModule& module, const std::string& path, const std::string& what,
                             std::int64_t chunk_elements = kSaveChunkElements);

}  // namespace zrt::optim
