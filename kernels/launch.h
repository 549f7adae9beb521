// How every op picks between its CUDA launcher and its CPU twin, and the
// stream it hands the launcher: see Note [CUDA launch or CPU twin].
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "zrt/runtime/error.h"
#include "zrt/runtime/stream.h"
#include "zrt/runtime/tensor.h"
#ifdef ZRT_WITH_CUDA
#include <cuda_runtime.h>

#include "zrt/runtime/cuda_check.h"
#endif

// Note [CUDA launch or CPU twin]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every op, in ops/ and in nn/, has the same plumbing:
//  - X.h / X.cpp (g++): the Tensor-level entry. It checks its operands, then
//      ZRT_CUDA_LAUNCH_AND_RETURN(op, device, cuda::launch_X(..., cuda_stream(stream)));
//    and otherwise runs the CPU twin over parallel_for (cpu_parallel.h),
//    in the stream's order: run_cpu_twin(stream, op, twin, tensors...).
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
#define ZRT_CUDA_LAUNCH_AND_RETURN(op, device, ...)             \
  do {                                                          \
    if ((device).is_cuda()) {                                   \
      ::zrt::CudaDeviceGuard zrt_launch_guard_((device).index); \
      return __VA_ARGS__;                                       \
    }                                                           \
  } while (0)
#else
#define ZRT_CUDA_LAUNCH_AND_RETURN(op, device, ...)            \
  do {                                                         \
    if ((device).is_cuda()) ::zrt::kernels::throw_no_cuda(op); \
  } while (0)
#endif

namespace zrt::kernels {

// Thrown for a CUDA tensor in a build without CUDA.
[[noreturn]] inline void throw_no_cuda(const char* op) {
  ZRT_THROW(InvalidArgument, op, ": CUDA tensor given to a build of zrt without CUDA");
}

// An issue_view of a tensor argument (Note [CPU streams]); an optional one
// (null pointer: none) becomes an optional view.
inline Tensor issue_arg(const Tensor& t) { return t.issue_view(); }
inline std::optional<Tensor> issue_arg(const Tensor* t) {
  return t ? std::optional<Tensor>(t->issue_view()) : std::nullopt;
}

// The storages of a twin's tensors (an optional one: null, none), counted
// while it is queued (Note [Host reads of queued work]).
inline void add_storage(std::vector<std::shared_ptr<Storage>>& out, const Tensor& t) {
  if (t.storage_ptr()) out.push_back(t.storage_ptr());
}
inline void add_storage(std::vector<std::shared_ptr<Storage>>& out, const Tensor* t) {
  if (t) add_storage(out, *t);
}

// Runs a CPU twin in `stream`'s order: twin(tensors...) now, on the calling
// thread, for the default CPU stream; for an owned CPU stream, on its thread
// with issue views of the tensors, which is why the twin takes its tensors
// (Tensor, or const Tensor* for an optional one) as arguments and everything
// else by value. A twin with a result reads it on the host: call it through
// run_cpu_twin_and_wait.
template <class Twin, class... Tensors>
void run_cpu_twin(Stream stream, const char* op, Twin twin, const Tensors&... tensors) {
  if (!stream.cpu_queue()) {
    twin(tensors...);
    return;
  }
  std::vector<std::shared_ptr<Storage>> storages;
  (add_storage(storages, tensors), ...);
  run_on_cpu_stream(
      stream, op, [twin = std::move(twin), ... views = issue_arg(tensors)] { twin(views...); },
      std::move(storages));
}

// The same for a twin that captured its operands' pointers at issue and
// takes no arguments: `written` are the tensors it writes, counted while it
// is queued (Note [Host reads of queued work]).
template <class Twin>
void run_cpu_twin_over(Stream stream, const char* op, const std::vector<Tensor>& written,
                       Twin twin) {
  if (!stream.cpu_queue()) {
    twin();
    return;
  }
  std::vector<std::shared_ptr<Storage>> storages;
  for (const Tensor& t : written) add_storage(storages, t);
  run_on_cpu_stream(stream, op, std::move(twin), std::move(storages));
}

// The same for a twin whose result the host reads: it waits for the stream
// (as a CUDA result copied to the host does) and returns twin's value.
template <class Twin, class... Tensors>
auto run_cpu_twin_and_wait(Stream stream, const char* op, Twin twin, const Tensors&... tensors) {
  if (!stream.cpu_queue()) return twin(tensors...);
  decltype(twin(tensors...)) result{};
  run_cpu_twin(
      stream, op,
      [&result, twin = std::move(twin)](const auto&... args) { result = twin(args...); },
      tensors...);
  stream.synchronize();
  return result;
}

#ifdef ZRT_WITH_CUDA
// The CUDA stream `stream` wraps; the CPU stream (with CUDA tensors, see
// check_operands) is CUDA's legacy default stream.
inline cudaStream_t cuda_stream(Stream stream) {
  return static_cast<cudaStream_t>(stream.native());
}
#endif

}  // namespace zrt::kernels
