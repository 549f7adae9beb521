// Per-element arithmetic of grad accumulate, shared by the CUDA kernel and
// the CPU twin: acc + scale * g in f32, one rounding per operation.
#pragma once

#include "zrt/kernels/hd.h"
#include "zrt/runtime/float16.h"

namespace zrt::kernels {

template <class G>
ZRT_HD inline float accumulate_element(float acc, G grad, float scale) {
  return acc + scale * to_f32(grad);
}

}  // namespace zrt::kernels
