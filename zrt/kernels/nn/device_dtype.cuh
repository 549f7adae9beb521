// Device scalar types for each floating DType and the launchers' one dispatch
// from a runtime dtype to them. .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/kernels/ops/launch.cuh"
#include "zrt/runtime/cuda_check.h"
#include "zrt/runtime/dtype.h"
#include "zrt/runtime/error.h"

namespace zrt::kernels {

template <class T>
struct DeviceTag {
  using type = T;
};

// Calls f(DeviceTag<T>{}) with T the device type of a floating dtype.
template <class F>
void dispatch_device_floating(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32: f(DeviceTag<float>{}); return;
    case DType::bf16: f(DeviceTag<__nv_bfloat16>{}); return;
    case DType::f16: f(DeviceTag<__half>{}); return;
    case DType::f64: f(DeviceTag<double>{}); return;
    default: break;
  }
  ZRT_THROW(InvalidArgument, op, ": dtype ", dtype_name(t), " is not a floating dtype");
}

using cuda::grid_for;
constexpr int kThreads = cuda::kThreadsPerBlock;

// for (i = this thread's first item; i < n; i += all threads of the grid)
#define ZRT_GRID_STRIDE_LOOP(i, n)                                                     \
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < (n); \
       i += std::int64_t(gridDim.x) * blockDim.x)

// Checks the launch that was just issued.
#define ZRT_CUDA_CHECK_LAUNCH() ZRT_CUDA_CHECK(cudaGetLastError())

}  // namespace zrt::kernels
