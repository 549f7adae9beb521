// CUDA launcher of the fused AdamW step (see adamw_math.h).
#pragma once

#include <cuda_runtime.h>

#include <span>

#include "zrt/kernels/ops/adamw_math.h"
#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

// `exp_avg` and `exp_avg_sq` are `moment_dtype` (f32 or bf16; bf16 rounds
// them stochastically under `key`). `param_out` may be nullptr (then `param_out_dtype` is ignored); otherwise
// bf16 or f16. One launch per piece. `simple`: one element per index, else
// 16-byte vector loads and stores for a piece whose arrays are all aligned
// (Note [Fast kernels and their simple references]); the same bits.
void launch_adamw(float* param, void* exp_avg, void* exp_avg_sq, DType moment_dtype,
                  const void* grad, DType grad_dtype, void* param_out, DType param_out_dtype,
                  std::span<const AdamWPiece> pieces, const AdamWCoefficients& coefficients,
                  const MomentRoundingKey& key, bool simple, cudaStream_t stream);

}  // namespace zrt::kernels::cuda
