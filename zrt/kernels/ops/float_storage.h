// The one dispatch from a runtime DType to the kernels' f32/bf16/f16 storage
// types (see Note [16-bit storage types] in float_bits.h). Usable from .cu
// files: needs no Eigen.
#pragma once

#include "zrt/kernels/ops/float_bits.h"
#include "zrt/runtime/dtype.h"
#include "zrt/runtime/error.h"

namespace zrt::kernels {

template <class T>
struct StorageTag {
  using type = T;
};

template <class T> constexpr DType storage_dtype();
template <> constexpr DType storage_dtype<float>() { return DType::f32; }
template <> constexpr DType storage_dtype<bf16_bits>() { return DType::bf16; }
template <> constexpr DType storage_dtype<f16_bits>() { return DType::f16; }

// Whether `t` is one of the float formats the runtime kernels compute on.
constexpr bool is_kernel_float(DType t) {
  return t == DType::f32 || t == DType::bf16 || t == DType::f16;
}

// Calls f(StorageTag<T>{}) with T = float, bf16_bits or f16_bits.
template <class F>
decltype(auto) dispatch_float_storage(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32: return f(StorageTag<float>{});
    case DType::bf16: return f(StorageTag<bf16_bits>{});
    case DType::f16: return f(StorageTag<f16_bits>{});
    default: break;
  }
  ZRT_THROW(InvalidArgument, op, ": dtype ", dtype_name(t), " is not supported (f32, bf16, f16 only)");
}

}  // namespace zrt::kernels
