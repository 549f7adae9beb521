// Element-wise reduction of device buffers, for the local backend's CUDA
// collectives (Note [Local collectives on the device] in local_comm.cpp).
// device_reduce is in CUDA builds only (device_reduce.cu is compiled into
// them alone); device_reduce_batches is plain C++, tested on the host.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "zrt/runtime/comm/communicator.h"
#include "zrt/runtime/dtype.h"

namespace zrt {

// The most buffers one launch of the reduction kernel reads.
inline constexpr std::size_t kMaxDeviceReduceInputs = 16;

// Note [Device reductions in batches]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The kernel takes its input pointers as a launch argument, so one launch
// reads at most kMaxDeviceReduceInputs buffers. More inputs (a local group
// of more ranks) are reduced in launches over consecutive runs of them in
// rank order: the first launch reduces srcs[0, max) into dst, each later
// one reduces dst (the running result) followed by the next max - 1 inputs
// back into dst. The result is stored in the element type between
// launches, which is the type host_reduce accumulates in, so the fold is
// the host's one addition at a time in rank order, bit for bit. avg sums in
// every launch and divides by the whole input count in the last one only.
// A later launch reads its inputs after the earlier launches wrote dst, so
// dst may alias only an input of the first launch.
struct DeviceReduceBatch {
  std::size_t begin = 0;  // the launch reads srcs[begin, end) ...
  std::size_t end = 0;
  bool accumulates = false;  // ... after dst (every launch but the first)
  bool last = false;         // avg divides by the whole count here
};

// The launches reducing `inputs` buffers, `max_inputs` read per launch
// (dst counting as one in every launch but the first).
inline std::vector<DeviceReduceBatch> device_reduce_batches(
    std::size_t inputs, std::size_t max_inputs = kMaxDeviceReduceInputs) {
  std::vector<DeviceReduceBatch> batches;
  if (inputs == 0 || max_inputs < 2) return batches;
  std::size_t begin = 0;
  while (begin < inputs) {
    const bool accumulates = begin > 0;
    const std::size_t take = std::min(inputs - begin, max_inputs - (accumulates ? 1 : 0));
    batches.push_back({.begin = begin, .end = begin + take, .accumulates = accumulates});
    begin += take;
  }
  batches.back().last = true;
  return batches;
}

// dst[i] = srcs[0][i] (op) srcs[1][i] (op) ... for i < numel, enqueued on
// the CUDA stream `cuda_stream` (a cudaStream_t; null: the legacy default
// stream) of the current device, with host_reduce's arithmetic (Note
// [Deterministic reduction order]), in launches of at most
// kMaxDeviceReduceInputs buffers (Note [Device reductions in batches]).
// Every pointer is on the current device; dst may alias one of
// srcs[0, kMaxDeviceReduceInputs) element for element, no later one.
void device_reduce(void* dst, std::span<const void* const> srcs, std::int64_t numel, DType dtype,
                   ReduceOp op, void* cuda_stream);

}  // namespace zrt
