// How every op picks between its CUDA launcher and its CPU twin, and the
// stream it hands the launcher: see Note [CUDA launch or CPU twin].
#pragma once

#include "zrt/runtime/error.h"
#include "zrt/runtime/stream.h"
#ifdef ZRT_WITH_CUDA
#include <cuda_runtime.h>

#include "zrt/runtime/cuda_check.h"
#endif

// Note [CUDA launch or CPU twin]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every op, in ops/ and in nn/, has the same plumbing:
//  - X.h / X.cpp (g++): the Tensor-level entry. It checks its operands, then
//      ZRT_CUDA_LAUNCH_AND_RETURN(op, device, cuda::launch_X(..., cuda_stream(stream)));
//    and otherwise runs the CPU twin over parallel_for (cpu_parallel.h).
//  - X.cuh / X.cu (nvcc, CUDA builds only): cuda::launch_X takes raw
//    pointers and a cudaStream_t, picks the element type with dispatch<Set>
//    over a type set of dispatch.h (Note [Kernel element types]) and runs a
//    functor per index or per row through for_each_index /
//    for_each_warp_row (grid.cuh).
//  - X_math.h: the per-element arithmetic, ZRT_HD (hd.h), which kernel and
//    twin both call, so they differ only in the loop around it and by
//    Note [Two precision rules].
// ZRT_CUDA_LAUNCH_AND_RETURN(op, device, launch) is the choice: for a CUDA
// `device` it makes that device current, evaluates `launch` and returns its
// value (void or not) from the op; in a build without CUDA it throws through
// throw_no_cuda(op) instead, and `launch` (naming a launcher that build lacks)
// is not compiled at all. For a CPU device it does nothing, and the op goes
// on to its CPU twin. A launch of several steps is an immediately invoked
// lambda. Parameters only a launch reads are [[maybe_unused]]: a CPU-only
// build never sees them used.
#ifdef ZRT_WITH_CUDA
#define ZRT_CUDA_LAUNCH_AND_RETURN(op, device, ...)              \
  do {                                                           \
    if ((device).is_cuda()) {                                    \
      ::zrt::CudaDeviceGuard zrt_launch_guard_((device).index);  \
      return __VA_ARGS__;                                        \
    }                                                            \
  } while (0)
#else
#define ZRT_CUDA_LAUNCH_AND_RETURN(op, device, ...)              \
  do {                                                           \
    if ((device).is_cuda()) ::zrt::kernels::throw_no_cuda(op);   \
  } while (0)
#endif

namespace zrt::kernels {

// Thrown for a CUDA tensor in a build without CUDA.
[[noreturn]] inline void throw_no_cuda(const char* op) {
  ZRT_THROW(InvalidArgument, op, ": CUDA tensor given to a build of zrt without CUDA");
}

#ifdef ZRT_WITH_CUDA
// The CUDA stream `stream` wraps; the CPU stream (with CUDA tensors, see
// check_operands) is CUDA's legacy default stream.
inline cudaStream_t cuda_stream(Stream stream) {
  return static_cast<cudaStream_t>(stream.native());
}
#endif

}  // namespace zrt::kernels
