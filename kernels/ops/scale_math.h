// Per-element arithmetic of scale, shared by the CUDA kernel and the CPU
// twin: x * factor in f32, rounded back to x's format.
#pragma once

#include "zrt/kernels/hd.h"
#include "zrt/runtime/float16.h"

namespace zrt::kernels {

template <class T>
ZRT_HD inline T scale_element(T x, float factor) {
  return from_f32<T>(to_f32(x) * factor);
}

}  // namespace zrt::kernels
