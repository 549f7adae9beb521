#include "zrt/runtime/comm/host_reduce.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "zrt/runtime/dtype_dispatch.h"

namespace zrt {

namespace {

// One operation in T's own type. The 16-bit floats compute in f32 and round
// back after each operation (Note [16-bit storage types]).
template <class T>
bool greater(T a, T b) {
  if constexpr (is_float16_v<T>) return to_f32(a) > to_f32(b);
  else return a > b;
}
template <class T>
T plus(T a, T b) {
  if constexpr (is_float16_v<T>) return from_f32<T>(to_f32(a) + to_f32(b));
  else return static_cast<T>(a + b);
}
template <class T>
T divided(T a, T b) {
  if constexpr (is_float16_v<T>) return from_f32<T>(to_f32(a) / to_f32(b));
  else return static_cast<T>(a / b);
}
template <class T>
T from_int(int v) {
  if constexpr (is_float16_v<T>) return from_f32<T>(static_cast<float>(v));
  else return static_cast<T>(v);
}

template <class T>
T combine(T a, T b, ReduceOp op) {
  switch (op) {
    case ReduceOp::max: return greater(b, a) ? b : a;
    case ReduceOp::min: return greater(a, b) ? b : a;
    default: return plus(a, b);  // sum and avg accumulate a sum
  }
}

// acc[i] = acc[i] (op) src[i] with `op` fixed at compile time so the loop vectorises.
template <class T>
void combine_into(T* acc, const T* src, std::int64_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::max:
      for (std::int64_t i = 0; i < n; ++i) acc[i] = greater(src[i], acc[i]) ? src[i] : acc[i];
      return;
    case ReduceOp::min:
      for (std::int64_t i = 0; i < n; ++i) acc[i] = greater(acc[i], src[i]) ? src[i] : acc[i];
      return;
    default:
      for (std::int64_t i = 0; i < n; ++i) acc[i] = plus(acc[i], src[i]);
      return;
  }
}

template <class T>
void divide(T* data, std::int64_t n, int divisor) {
  const T d = from_int<T>(divisor);
  for (std::int64_t i = 0; i < n; ++i) data[i] = divided(data[i], d);
}

}  // namespace

void host_reduce(void* dst, std::span<const void* const> srcs, std::int64_t numel, DType dtype,
                 ReduceOp op) {
  ZRT_CHECK_ARG(!srcs.empty(), "host_reduce: no inputs");
  dispatch<HostTypes>(dtype, "host_reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Blocks through a local accumulator: the order per element stays rank
    // order, and dst may alias an input that other blocks still read.
    constexpr std::int64_t kBlock = 4096;
    std::array<T, kBlock> acc;
    T* out = static_cast<T*>(dst);
    for (std::int64_t b = 0; b < numel; b += kBlock) {
      const std::int64_t n = std::min(kBlock, numel - b);
      std::memcpy(acc.data(), static_cast<const T*>(srcs[0]) + b, n * sizeof(T));
      for (std::size_t r = 1; r < srcs.size(); ++r)
        combine_into(acc.data(), static_cast<const T*>(srcs[r]) + b, n, op);
      if (op == ReduceOp::avg) divide(acc.data(), n, static_cast<int>(srcs.size()));
      std::memcpy(out + b, acc.data(), n * sizeof(T));
    }
  });
}

void host_accumulate(const void* in, void* inout, std::int64_t numel, DType dtype, ReduceOp op) {
  dispatch<HostTypes>(dtype, "host_accumulate", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* a = static_cast<const T*>(in);
    T* b = static_cast<T*>(inout);
    for (std::int64_t i = 0; i < numel; ++i) b[i] = combine(a[i], b[i], op);
  });
}

void host_divide(void* data, std::int64_t numel, DType dtype, int divisor) {
  ZRT_CHECK_ARG(divisor > 0, "host_divide: divisor ", divisor, " must be positive");
  dispatch<HostTypes>(dtype, "host_divide", [&](auto tag) {
    using T = typename decltype(tag)::type;
    divide(static_cast<T*>(data), numel, divisor);
  });
}

}  // namespace zrt
