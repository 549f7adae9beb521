// The one dispatch from a runtime DType to a C++ element type, for the
// runtime, the kernels (.cpp and .cu alike) and every library above them.
//
// Note [One dtype dispatch]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Which C++ type stands for a dtype depends on the code that handles it, so a
// caller names its types in a TypeSet of As<dtype, type> entries, and
// dispatch<Set>(dtype, op, f) calls f(Tag<T>{}) with the set's T for dtype,
// or throws InvalidArgument naming op and the dtypes the set accepts;
// has_dtype<Set>(dtype) asks without throwing. HostTypes below is the
// runtime's own set, every dtype as the type host code stores it in (the
// 16-bit floats as zrt::bf16 / zrt::f16, Note [16-bit storage types]); the
// kernels add theirs on top (Note [Kernel element types] in
// zrt/kernels/dispatch.h). This header needs neither Eigen nor CUDA.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "zrt/runtime/dtype.h"
#include "zrt/runtime/error.h"
#include "zrt/runtime/float16.h"

namespace zrt {

template <class T>
struct Tag {
  using type = T;
};

// Dtype D is handled as C++ type T.
template <DType D, class T>
struct As {
  static constexpr DType dtype = D;
  using type = T;
};

template <class... Entries>
struct TypeSet {};

// Every dtype as the type host code stores it in.
using HostTypes = TypeSet<As<DType::f32, float>, As<DType::bf16, bf16>, As<DType::f16, f16>,
                          As<DType::f64, double>, As<DType::i32, std::int32_t>,
                          As<DType::i64, std::int64_t>, As<DType::u8, std::uint8_t>>;

// The dtype HostTypes gives T (Tensor::data<T> checks it).
template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<bf16>() {
  return DType::bf16;
}
template <>
constexpr DType dtype_of<f16>() {
  return DType::f16;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<std::int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<std::int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<std::uint8_t>() {
  return DType::u8;
}

namespace detail {

template <class... E>
constexpr bool set_contains(TypeSet<E...>, DType t) {
  return ((t == E::dtype) || ...);
}

[[noreturn]] inline void throw_unsupported_dtype(const char* op, DType t,
                                                 std::initializer_list<DType> accepted) {
  std::string names;
  for (DType a : accepted) names += (names.empty() ? "" : ", ") + std::string(dtype_name(a));
  ZRT_THROW(InvalidArgument, op, ": dtype ", dtype_name(t), " is not supported (", names, " only)");
}

// f(Tag<T>{}) for the first entry whose dtype is t, which is one of them.
template <class E, class... Rest, class F>
decltype(auto) call_with_type(DType t, F& f) {
  if constexpr (sizeof...(Rest) == 0) {
    return f(Tag<typename E::type>{});
  } else {
    if (t == E::dtype) return f(Tag<typename E::type>{});
    return call_with_type<Rest...>(t, f);
  }
}

template <class... E, class F>
decltype(auto) dispatch_in(TypeSet<E...> set, DType t, const char* op, F& f) {
  if (!set_contains(set, t)) throw_unsupported_dtype(op, t, {E::dtype...});
  return call_with_type<E...>(t, f);
}

}  // namespace detail

// Whether dispatch<Set> accepts `t`.
template <class Set>
constexpr bool has_dtype(DType t) {
  return detail::set_contains(Set{}, t);
}

// Calls f(Tag<T>{}) with T the type Set gives dtype `t`; `op` names the
// operation in the error thrown for a dtype outside the set.
template <class Set, class F>
decltype(auto) dispatch(DType t, const char* op, F&& f) {
  return detail::dispatch_in(Set{}, t, op, f);
}

}  // namespace zrt
