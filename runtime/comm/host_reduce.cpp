#include "zrt/runtime/comm/host_reduce.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "zrt/runtime/comm/reduce_element.h"
#include "zrt/runtime/dtype_dispatch.h"

namespace zrt {

namespace {

using detail::reduce_combine;
using detail::reduce_divided;
using detail::reduce_from_int;
using detail::reduce_greater;
using detail::reduce_plus;

// acc[i] = acc[i] (op) src[i] with `op` fixed at compile time so the loop vectorises.
template <class T>
void combine_into(T* acc, const T* src, std::int64_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::max:
      for (std::int64_t i = 0; i < n; ++i)
        acc[i] = reduce_greater(src[i], acc[i]) ? src[i] : acc[i];
      return;
    case ReduceOp::min:
      for (std::int64_t i = 0; i < n; ++i)
        acc[i] = reduce_greater(acc[i], src[i]) ? src[i] : acc[i];
      return;
    default:
      for (std::int64_t i = 0; i < n; ++i) acc[i] = reduce_plus(acc[i], src[i]);
      return;
  }
}

template <class T>
void divide(T* data, std::int64_t n, int divisor) {
  const T d = reduce_from_int<T>(divisor);
  for (std::int64_t i = 0; i < n; ++i) data[i] = reduce_divided(data[i], d);
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
    for (std::int64_t i = 0; i < numel; ++i) b[i] = reduce_combine(a[i], b[i], op);
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
