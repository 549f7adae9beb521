// What the CPU twins and the CUDA kernels of the model-zoo ops share: the
// compute precision of each storage type. Included by
// g++ and by nvcc, so it must not pull in Eigen or runtime/tensor.h.
//
// Note [Compute precision]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// Activations are f32, bf16 or f16 and every op loads them into float,
// computes and accumulates in float, and rounds once on store. f64 tensors
// compute in double: they exist so CPU tests can compare against central
// finite differences, which float rounding would drown.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "zrt/kernels/ops/hd.h"

namespace zrt::kernels {

// The type an op computes in for storage type T (see Note [Compute precision]).
template <class T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Storage -> compute and back. Eigen::bfloat16/half on the host and
// __nv_bfloat16/__half on the device all convert through static_cast (RNE).
template <class A, class T>
ZRT_HD A load(T v) {
  return static_cast<A>(v);
}
template <class T, class A>
ZRT_HD T store(A v) {
  if constexpr (std::is_same_v<T, A>) return v;
  else return static_cast<T>(static_cast<float>(v));
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
