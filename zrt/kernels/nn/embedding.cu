#include "zrt/kernels/nn/device_dtype.cuh"
#include "zrt/kernels/nn/embedding.cuh"
#include "zrt/kernels/nn/embedding_math.h"

namespace zrt::kernels {
namespace {

template <class T, class I, class A>
__global__ void embedding_forward_kernel(std::int64_t n, std::int64_t channels, std::int64_t seq,
                                         const I* ids, const T* wte, const T* wpe, T* out) {
  ZRT_GRID_STRIDE_LOOP(idx, n * channels)
    embedding_forward_element<T, I, A>(idx, channels, seq, ids, wte, wpe, out);
}

template <class T, class A>
__global__ void token_grad_kernel(std::int64_t vocab, std::int64_t channels,
                                  const std::int64_t* offsets, const std::int64_t* rows,
                                  const T* dout, T* dwte, bool accumulate) {
  ZRT_GRID_STRIDE_LOOP(idx, vocab * channels)
    token_grad_element<T, A>(idx, channels, offsets, rows, dout, dwte, accumulate);
}

template <class T, class A>
__global__ void position_grad_kernel(std::int64_t positions, std::int64_t channels,
                                     std::int64_t batch, std::int64_t seq, const T* dout, T* dwpe,
                                     bool accumulate) {
  ZRT_GRID_STRIDE_LOOP(idx, positions * channels)
    position_grad_element<T, A>(idx, channels, batch, seq, dout, dwpe, accumulate);
}

}  // namespace

void embedding_forward_cuda(DType dtype, std::int64_t n, std::int64_t channels, std::int64_t seq,
                            const void* ids, bool ids_are_i64, const void* wte, const void* wpe,
                            void* out, int device, cudaStream_t stream) {
  if (n * channels == 0) return;
  CudaDeviceGuard guard(device);
  dispatch_device_floating(dtype, "embedding_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    auto launch = [&](auto* typed_ids) {
      using I = std::remove_const_t<std::remove_pointer_t<decltype(typed_ids)>>;
      embedding_forward_kernel<T, I, A><<<grid_for(n * channels), kThreads, 0, stream>>>(
          n, channels, seq, typed_ids, static_cast<const T*>(wte), static_cast<const T*>(wpe),
          static_cast<T*>(out));
    };
    if (ids_are_i64) launch(static_cast<const std::int64_t*>(ids));
    else launch(static_cast<const std::int32_t*>(ids));
  });
  ZRT_CUDA_CHECK_LAUNCH();
}

void embedding_backward_cuda(DType dtype, std::int64_t vocab, std::int64_t positions,
                             std::int64_t batch, std::int64_t seq, std::int64_t channels,
                             const std::int64_t* offsets, const std::int64_t* rows,
                             const void* dout, void* dwte, void* dwpe, bool accumulate,
                             int device, cudaStream_t stream) {
  CudaDeviceGuard guard(device);
  dispatch_device_floating(dtype, "embedding_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    if (vocab * channels > 0) {
      token_grad_kernel<T, A><<<grid_for(vocab * channels), kThreads, 0, stream>>>(
          vocab, channels, offsets, rows, static_cast<const T*>(dout), static_cast<T*>(dwte),
          accumulate);
      ZRT_CUDA_CHECK_LAUNCH();
    }
    if (dwpe && positions * channels > 0) {
      position_grad_kernel<T, A><<<grid_for(positions * channels), kThreads, 0, stream>>>(
          positions, channels, batch, seq, static_cast<const T*>(dout), static_cast<T*>(dwpe),
          accumulate);
      ZRT_CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace zrt::kernels
