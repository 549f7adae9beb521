// The shape of a causal self-attention call (qkv [B, T, 3C], H heads of
// head_dim = C / H), shared by the CUDA kernels, the row arithmetic of
// attention_math.h and the blocked CPU kernels of cpu_isa/.
#pragma once

#include <cstdint>

namespace zrt::kernels {

struct AttentionDims {
  std::int64_t batch, seq, channels, heads, head_dim;
};

}  // namespace zrt::kernels
