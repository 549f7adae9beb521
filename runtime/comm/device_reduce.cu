#include "zrt/runtime/comm/device_reduce.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <limits>

#include "zrt/runtime/comm/reduce_element.h"
#include "zrt/runtime/cuda_check.h"
#include "zrt/runtime/dtype_dispatch.h"

namespace zrt {
namespace {

template <class T>
struct Inputs {
  const T* p[kMaxDeviceReduceInputs];
  int count;
};

// host_reduce's order per element: input order, then (divisor > 0) avg's
// one division by the whole count (Note [Device reductions in batches]).
template <class T>
__global__ void reduce_kernel(T* dst, Inputs<T> in, std::int64_t n, ReduceOp op, int divisor) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    T acc = in.p[0][i];
    for (int r = 1; r < in.count; ++r) acc = detail::reduce_combine(acc, in.p[r][i], op);
    if (divisor > 0) acc = detail::reduce_divided(acc, detail::reduce_from_int<T>(divisor));
    dst[i] = acc;
  }
}

}  // namespace

void device_reduce(void* dst, std::span<const void* const> srcs, std::int64_t numel, DType dtype,
                   ReduceOp op, void* cuda_stream) {
  ZRT_CHECK_ARG(!srcs.empty(), "device_reduce: no inputs");
  ZRT_CHECK_ARG(srcs.size() <= std::size_t(std::numeric_limits<int>::max()),
                "device_reduce: ", srcs.size(), " inputs");
  for (std::size_t r = kMaxDeviceReduceInputs; r < srcs.size(); ++r)
    ZRT_CHECK_ARG(srcs[r] != dst, "device_reduce: dst aliases input ", r, " of ", srcs.size(),
                  ", which a launch after the first reads (at most the first ",
                  kMaxDeviceReduceInputs, " may be dst)");
  if (numel <= 0) return;
  int device = 0, sms = 1;
  ZRT_CUDA_CHECK(cudaGetDevice(&device));
  ZRT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>(
      std::clamp<std::int64_t>((numel + kThreads - 1) / kThreads, 1, std::int64_t(sms) * 8));
  dispatch<HostTypes>(dtype, "device_reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = static_cast<T*>(dst);
    // Note [Device reductions in batches]: later launches fold into dst.
    for (const DeviceReduceBatch& b : device_reduce_batches(srcs.size())) {
      Inputs<T> in{};
      if (b.accumulates) in.p[in.count++] = out;
      for (std::size_t r = b.begin; r < b.end; ++r)
        in.p[in.count++] = static_cast<const T*>(srcs[r]);
      const int divisor = b.last && op == ReduceOp::avg ? static_cast<int>(srcs.size()) : 0;
      reduce_kernel<T><<<blocks, kThreads, 0, static_cast<cudaStream_t>(cuda_stream)>>>(
          out, in, numel, op, divisor);
      ZRT_CUDA_CHECK(cudaGetLastError());
    }
  });
}

}  // namespace zrt
