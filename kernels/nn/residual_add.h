// Residual add: out = a + b elementwise (computed in fp32 for 16-bit types).
// Its backward is the identity on both inputs, so it has no kernel of its own.
#pragma once

#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// a, b, out share dtype, device and numel; out may be a or b.
void residual_add(const Tensor& a, const Tensor& b, const Tensor& out, Stream stream = {});

}  // namespace zrt::kernels
