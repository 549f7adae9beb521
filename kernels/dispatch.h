// The one dispatch from a runtime DType to a kernel's C++ element type, for
// .cpp and .cu files alike (it needs neither Eigen nor CUDA).
//
// Note [Kernel element types]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Which C++ type stands for a dtype depends on the code that computes on it,
// so each family of kernels names its types in a TypeSet of As<dtype, type>
// entries:
//  - StorageFloats (ops/float_bits.h): the runtime ops keep bf16/f16 as raw
//    bits on host and device alike (Note [16-bit storage types]).
//  - NnFloats (nn/element.h): the model-zoo ops compute on Eigen's 16-bit
//    types in the CPU twins and on CUDA's in the kernels, plus f64
//    (Note [Compute precision]).
//  - IdTypes and WordTypes below: token ids, and raw words for ops that only
//    move bits.
// dispatch<Set>(dtype, op, f) calls f(Tag<T>{}) with the set's T for dtype,
// or throws InvalidArgument naming op and the dtypes the set accepts.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "zrt/runtime/dtype.h"
#include "zrt/runtime/error.h"

namespace zrt::kernels {

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

// Integer ids (tokens, targets).
using IdTypes = TypeSet<As<DType::i32, std::int32_t>, As<DType::i64, std::int64_t>>;

// Every dtype as the unsigned word of its size, for ops that write bit
// patterns without arithmetic.
using WordTypes = TypeSet<As<DType::f32, std::uint32_t>, As<DType::bf16, std::uint16_t>,
                          As<DType::f16, std::uint16_t>, As<DType::f64, std::uint64_t>,
                          As<DType::i32, std::uint32_t>, As<DType::i64, std::uint64_t>,
                          As<DType::u8, std::uint8_t>>;

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

}  // namespace zrt::kernels
