// What the CPU twins and the CUDA kernels of the model-zoo ops share: the
// element type of each floating dtype and the compute precision of each.
// Included by g++ and by nvcc; it pulls in Eigen under g++ only.
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

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#else
#include "zrt/runtime/dtype_dispatch.h"  // zrt::bf16, zrt::f16 (Eigen)
#endif

#include "zrt/kernels/dispatch.h"
#include "zrt/kernels/hd.h"

namespace zrt::kernels {

// The element type of each floating dtype (Note [Kernel element types]):
// CUDA's 16-bit types in the kernels, Eigen's in the CPU twins.
#ifdef __CUDACC__
using NnFloats = TypeSet<As<DType::f32, float>, As<DType::bf16, __nv_bfloat16>,
                         As<DType::f16, __half>, As<DType::f64, double>>;
#else
using NnFloats = TypeSet<As<DType::f32, float>, As<DType::bf16, bf16>, As<DType::f16, f16>,
                         As<DType::f64, double>>;
#endif

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
