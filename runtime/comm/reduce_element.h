// One element of a reduction in a dtype's own type (Note [Deterministic
// reduction order] in host_reduce.h): the host loops of host_reduce.cpp and
// the device kernel of device_reduce.cu both apply these, so a CUDA tensor's
// collective on the local backend gets the host's bits.
#pragma once

#include "zrt/runtime/comm/communicator.h"
#include "zrt/runtime/float16.h"
#include "zrt/runtime/host_device.h"

namespace zrt::detail {

// One operation in T's own type. The 16-bit floats compute in f32 and round
// back after each operation (Note [16-bit storage types]).
template <class T>
ZRT_HD inline bool reduce_greater(T a, T b) {
  if constexpr (is_float16_v<T>)
    return to_f32(a) > to_f32(b);
  else
    return a > b;
}
template <class T>
ZRT_HD inline T reduce_plus(T a, T b) {
  if constexpr (is_float16_v<T>)
    return from_f32<T>(to_f32(a) + to_f32(b));
  else
    return static_cast<T>(a + b);
}
template <class T>
ZRT_HD inline T reduce_divided(T a, T b) {
  if constexpr (is_float16_v<T>)
    return from_f32<T>(to_f32(a) / to_f32(b));
  else
    return static_cast<T>(a / b);
}
template <class T>
ZRT_HD inline T reduce_from_int(int v) {
  if constexpr (is_float16_v<T>)
    return from_f32<T>(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

// a (op) b; avg accumulates a sum.
template <class T>
ZRT_HD inline T reduce_combine(T a, T b, ReduceOp op) {
  switch (op) {
    case ReduceOp::max:
      return reduce_greater(b, a) ? b : a;
    case ReduceOp::min:
      return reduce_greater(a, b) ? b : a;
    default:
      return reduce_plus(a, b);
  }
}

}  // namespace zrt::detail
