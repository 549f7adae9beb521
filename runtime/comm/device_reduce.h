// Element-wise reduction of device buffers, for the local backend's CUDA
// collectives (Note [Local collectives on the device] in local_comm.cpp).
// CUDA builds only: device_reduce.cu is compiled into them alone.
#pragma once

#include <cstdint>
#include <span>

#include "zrt/runtime/comm/communicator.h"
#include "zrt/runtime/dtype.h"

namespace zrt {

inline constexpr std::size_t kMaxDeviceReduceInputs = 16;

// dst[i] = srcs[0][i] (op) srcs[1][i] (op) ... for i < numel, enqueued on
// the CUDA stream `cuda_stream` (a cudaStream_t; null: the legacy default
// stream) of the current device, with host_reduce's arithmetic (Note
// [Deterministic reduction order]). Every pointer is on the current device;
// dst may alias a src element for element. At most kMaxDeviceReduceInputs.
void device_reduce(void* dst, std::span<const void* const> srcs, std::int64_t numel, DType dtype,
                   ReduceOp op, void* cuda_stream);

}  // namespace zrt
