#include "zrt/runtime/comm/device_reduce.h"

#include <cuda_runtime.h>

#include <algorithm>

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

// host_reduce's order per element: rank order, then avg's one division.
template <class T>
__global__ void reduce_kernel(T* dst, Inputs<T> in, std::int64_t n, ReduceOp op) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    T acc = in.p[0][i];
    for (int r = 1; r < in.count; ++r) acc = detail::reduce_combine(acc, in.p[r][i], op);
    if (op == ReduceOp::avg) acc = detail::reduce_divided(acc, detail::reduce_from_int<T>(in.count));
    dst[i] = acc;
  }
}

}  // namespace

void device_reduce(void* dst, std::span<const void* const> srcs, std::int64_t numel, DType dtype,
                   ReduceOp op, void* cuda_stream) {
  ZRT_CHECK_ARG(!srcs.empty() && srcs.size() <= kMaxDeviceReduceInputs, "device_reduce: ",
                srcs.size(), " inputs (1 to ", kMaxDeviceReduceInputs, ")");
  if (numel <= 0) return;
  int device = 0, sms = 1;
  ZRT_CUDA_CHECK(cudaGetDevice(&device));
  ZRT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>(
      std::clamp<std::int64_t>((numel + kThreads - 1) / kThreads, 1, std::int64_t(sms) * 8));
  dispatch<HostTypes>(dtype, "device_reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    Inputs<T> in{};
    in.count = static_cast<int>(srcs.size());
    for (std::size_t r = 0; r < srcs.size(); ++r) in.p[r] = static_cast<const T*>(srcs[r]);
    reduce_kernel<T><<<blocks, kThreads, 0, static_cast<cudaStream_t>(cuda_stream)>>>(
        static_cast<T*>(dst), in, numel, op);
    ZRT_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace zrt
