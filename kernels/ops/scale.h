// scale: multiply a buffer in place by a scalar (gradient clipping, averaging).
#pragma once

#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// x[i] = x[i] * factor, computed in f32 (factor rounded to f32), rounded to
// nearest even for bf16/f16. `x` is f32, bf16 or f16.
void scale_(const Tensor& x, double factor, Stream stream = {});

}  // namespace zrt::kernels
