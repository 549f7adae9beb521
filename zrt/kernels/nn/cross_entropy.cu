#include "zrt/kernels/nn/cross_entropy.cuh"
#include "zrt/kernels/nn/cross_entropy_math.h"
#include "zrt/kernels/nn/device_dtype.cuh"
#include "zrt/kernels/nn/warp_reduce.cuh"

namespace zrt::kernels {
namespace {

constexpr int kWarpsPerBlock = kThreads / 32;

// One warp per row: max, then Σ exp(x - max), then the row's loss.
template <class T, class I, class A>
__global__ void cross_entropy_rows_kernel(std::int64_t rows, std::int64_t vocab, const T* logits,
                                          const I* targets, A* losses, A* lse) {
  const std::int64_t row = std::int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const T* x = logits + row * vocab;
  A m = load<A>(x[0]);
  for (std::int64_t i = lane; i < vocab; i += 32) m = max(m, load<A>(x[i]));
  m = warp_max(m);
  A s = 0;
  for (std::int64_t i = lane; i < vocab; i += 32) s += exp_(load<A>(x[i]) - m);
  const A row_lse = m + log_(warp_sum(s));
  if (lane == 0) {
    const std::int64_t t = static_cast<std::int64_t>(targets[row]);
    lse[row] = row_lse;
    losses[row] = t < 0 ? A(0) : row_lse - load<A>(x[t]);
  }
}

// The mean in row order on one thread, so it is bit-identical to the CPU's.
template <class A>
__global__ void cross_entropy_sum_kernel(std::int64_t rows, const A* losses, A normaliser,
                                         A* loss) {
  A s = 0;
  for (std::int64_t r = 0; r < rows; ++r) s += losses[r];
  *loss = s / normaliser;
}

template <class T, class I, class A>
__global__ void cross_entropy_backward_kernel(std::int64_t rows, std::int64_t vocab,
                                              const T* logits, const I* targets, const A* lse,
                                              A scale, T* dlogits) {
  ZRT_GRID_STRIDE_LOOP(idx, rows * vocab) {
    const std::int64_t r = idx / vocab, i = idx % vocab;
    const std::int64_t t = static_cast<std::int64_t>(targets[r]);
    dlogits[idx] = t < 0 ? store<T>(A(0))
                         : store<T>(cross_entropy_dlogit(load<A>(logits[idx]), lse[r], i == t, scale));
  }
}

// Calls f(typed targets pointer).
template <class F>
void with_targets(const void* targets, bool is_i64, F&& f) {
  if (is_i64) f(static_cast<const std::int64_t*>(targets));
  else f(static_cast<const std::int32_t*>(targets));
}

}  // namespace

void cross_entropy_forward_cuda(DType dtype, std::int64_t rows, std::int64_t vocab,
                                const void* logits, const void* targets, bool targets_are_i64,
                                double normaliser, void* losses, void* lse, void* loss, int device,
                                cudaStream_t stream) {
  CudaDeviceGuard guard(device);
  dispatch_device_floating(dtype, "cross_entropy_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    if (rows > 0) {
      with_targets(targets, targets_are_i64, [&](auto* t) {
        using I = std::remove_const_t<std::remove_pointer_t<decltype(t)>>;
        const unsigned blocks = static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
        cross_entropy_rows_kernel<T, I, A><<<blocks, kThreads, 0, stream>>>(
            rows, vocab, static_cast<const T*>(logits), t, static_cast<A*>(losses),
            static_cast<A*>(lse));
      });
      ZRT_CUDA_CHECK_LAUNCH();
    }
    cross_entropy_sum_kernel<A><<<1, 1, 0, stream>>>(rows, static_cast<const A*>(losses),
                                                     A(normaliser), static_cast<A*>(loss));
    ZRT_CUDA_CHECK_LAUNCH();
  });
}

void cross_entropy_backward_cuda(DType dtype, std::int64_t rows, std::int64_t vocab,
                                 const void* logits, const void* targets, bool targets_are_i64,
                                 const void* lse, double scale, void* dlogits, int device,
                                 cudaStream_t stream) {
  if (rows * vocab == 0) return;
  CudaDeviceGuard guard(device);
  dispatch_device_floating(dtype, "cross_entropy_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    with_targets(targets, targets_are_i64, [&](auto* t) {
      using I = std::remove_const_t<std::remove_pointer_t<decltype(t)>>;
      cross_entropy_backward_kernel<T, I, A><<<grid_for(rows * vocab), kThreads, 0, stream>>>(
          rows, vocab, static_cast<const T*>(logits), t, static_cast<const A*>(lse), A(scale),
          static_cast<T*>(dlogits));
    });
    ZRT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace zrt::kernels
