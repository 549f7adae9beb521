// grad accumulate: an f32 gradient buffer += scale * a gradient in f32, bf16
// or f16 (micro-batch accumulation into full_prec_grad).
#pragma once

#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// acc[i] += scale * grad[i], computed in f32. `acc` is f32; `grad` is f32,
// bf16 or f16 with the same numel.
void accumulate_grad(const Tensor& acc, const Tensor& grad, float scale = 1.0f, Stream stream = {});

}  // namespace zrt::kernels
