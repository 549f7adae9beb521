// Squared L2 norm and non-finite check of a buffer in one pass, with a
// deterministic summation order (Note [Deterministic norm] in norm_math.h).
#pragma once

#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

struct NormResult {
  double squared_norm = 0;  // sum of x^2, accumulated in f32 per block, f64 across blocks
  bool non_finite = false;  // some element is NaN or Inf
};

// `x` is f32, bf16 or f16. On CUDA the call waits for `stream` to finish the
// reduction, since the result is returned on the host.
NormResult squared_norm(const Tensor& x, Stream stream = {});

// The same pass, left on the device for a later single read: writes, in
// `stream` order, f64 {sum of x^2, 1 if some element is NaN or Inf else 0}
// into `out` (f64, 2 elements, on x's device). Nothing waits.
void squared_norm_into(const Tensor& x, const Tensor& out, Stream stream = {});

// Whether any element of `x` is NaN or Inf (the same pass as squared_norm).
bool has_non_finite(const Tensor& x, Stream stream = {});

}  // namespace zrt::kernels
