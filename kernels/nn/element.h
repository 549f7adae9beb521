// What the CPU twins and the CUDA kernels of the model-zoo ops share: the
// compute precision of each element type, and loading into it and storing
// back. Included by g++ and by nvcc alike; it needs neither Eigen nor CUDA's
// 16-bit types.
//
// Note [Compute precision]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// Activations are f32, bf16 or f16 and every op loads them into float,
// computes and accumulates in float, and rounds once on store. f64 tensors
// compute in double: they exist so CPU tests can compare against central
// finite differences, which float rounding would drown. The element types
// are NnFloats (Note [Kernel element types]); bf16 and f16 load and store
// through the one conversion (Note [16-bit storage types]), so a CPU twin
// and its kernel round every stored element alike.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "zrt/kernels/dispatch.h"
#include "zrt/kernels/hd.h"
#include "zrt/runtime/float16.h"

namespace zrt::kernels {

// The type an op computes in for storage type T (see Note [Compute precision]).
template <class T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Storage -> compute and back; bf16 and f16 through f32 (round to nearest
// even on store).
template <class A, class T>
ZRT_HD A load(T v) {
  if constexpr (is_float16_v<T>)
    return static_cast<A>(to_f32(v));
  else
    return static_cast<A>(v);
}
template <class T, class A>
ZRT_HD T store(A v) {
  if constexpr (std::is_same_v<T, A>)
    return v;
  else if constexpr (is_float16_v<T>)
    return from_f32<T>(static_cast<float>(v));
  else
    return static_cast<T>(static_cast<float>(v));
}

// Math that resolves to CUDA's device functions under nvcc and <cmath> on the
// host, for float and double alike.
#if defined(__CUDA_ARCH__)
#define ZRT_MATH_FN(name) \
  template <class A>      \
  ZRT_HD A name##_(A x) { \
    return ::name(x);     \
  }
#else
#define ZRT_MATH_FN(name) \
  template <class A>      \
  ZRT_HD A name##_(A x) { \
    return std::name(x);  \
  }
#endif
ZRT_MATH_FN(tanh)
ZRT_MATH_FN(exp)
ZRT_MATH_FN(log)
ZRT_MATH_FN(sqrt)
#undef ZRT_MATH_FN

}  // namespace zrt::kernels
