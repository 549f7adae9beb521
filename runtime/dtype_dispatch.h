// Host scalar types for each DType and the one dispatch from a runtime dtype to
// a type tag. bf16/f16 use Eigen's types (bit-compatible with the 16-bit
// storage formats), so host code can do arithmetic on them.
#pragma once

#include <Eigen/Core>
#include <cstdint>

#include "zrt/runtime/dtype.h"
#include "zrt/runtime/error.h"

namespace zrt {

using bf16 = Eigen::bfloat16;
using f16 = Eigen::half;

template <class T>
struct TypeTag {
  using type = T;
};

template <DType D> struct HostType;
template <> struct HostType<DType::f32> { using type = float; };
template <> struct HostType<DType::bf16> { using type = bf16; };
template <> struct HostType<DType::f16> { using type = f16; };
template <> struct HostType<DType::f64> { using type = double; };
template <> struct HostType<DType::i32> { using type = std::int32_t; };
template <> struct HostType<DType::i64> { using type = std::int64_t; };
template <> struct HostType<DType::u8> { using type = std::uint8_t; };

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<bf16>() { return DType::bf16; }
template <> constexpr DType dtype_of<f16>() { return DType::f16; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<std::int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<std::int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<std::uint8_t>() { return DType::u8; }

// Calls f(TypeTag<T>{}) with T the host type of `t`. `op` names the operation
// in the error thrown for a dtype the caller does not accept.
template <class F>
decltype(auto) dispatch_dtype(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32: return f(TypeTag<float>{});
    case DType::bf16: return f(TypeTag<bf16>{});
    case DType::f16: return f(TypeTag<f16>{});
    case DType::f64: return f(TypeTag<double>{});
    case DType::i32: return f(TypeTag<std::int32_t>{});
    case DType::i64: return f(TypeTag<std::int64_t>{});
    case DType::u8: return f(TypeTag<std::uint8_t>{});
  }
  ZRT_THROW(InvalidArgument, op, ": unknown dtype code ", static_cast<int>(t));
}

// The same, restricted to floating dtypes (f32, bf16, f16, f64).
template <class F>
decltype(auto) dispatch_floating(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32: return f(TypeTag<float>{});
    case DType::bf16: return f(TypeTag<bf16>{});
    case DType::f16: return f(TypeTag<f16>{});
    case DType::f64: return f(TypeTag<double>{});
    default: break;
  }
  ZRT_THROW(InvalidArgument, op, ": dtype ", dtype_name(t), " is not a floating dtype");
}

}  // namespace zrt
