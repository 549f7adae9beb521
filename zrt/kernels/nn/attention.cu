#include "zrt/kernels/nn/attention.cuh"
#include "zrt/kernels/nn/device_dtype.cuh"

namespace zrt::kernels {
namespace {

template <class T, class A>
__global__ void attention_forward_kernel(AttentionDims d, const T* qkv, T* out, A* lse) {
  ZRT_GRID_STRIDE_LOOP(r, d.batch * d.heads * d.seq)
    attention_forward_row<T, A>(d, r, qkv, out, lse);
}

template <class T, class A>
__global__ void attention_query_kernel(AttentionDims d, const T* dout, const T* qkv, const T* out,
                                       const A* lse, A* dsum, T* dqkv) {
  ZRT_GRID_STRIDE_LOOP(r, d.batch * d.heads * d.seq)
    attention_backward_query_row<T, A>(d, r, dout, qkv, out, lse, dsum, dqkv);
}

template <class T, class A>
__global__ void attention_key_kernel(AttentionDims d, const T* dout, const T* qkv, const A* lse,
                                     const A* dsum, T* dqkv) {
  ZRT_GRID_STRIDE_LOOP(r, d.batch * d.heads * d.seq)
    attention_backward_key_row<T, A>(d, r, dout, qkv, lse, dsum, dqkv);
}

}  // namespace

void attention_forward_cuda(DType dtype, const AttentionDims& dims, const void* qkv, void* out,
                            void* lse, int device, cudaStream_t stream) {
  const std::int64_t rows = dims.batch * dims.heads * dims.seq;
  if (rows == 0) return;
  CudaDeviceGuard guard(device);
  dispatch_device_floating(dtype, "attention_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    attention_forward_kernel<T, A><<<grid_for(rows), kThreads, 0, stream>>>(
        dims, static_cast<const T*>(qkv), static_cast<T*>(out), static_cast<A*>(lse));
  });
  ZRT_CUDA_CHECK_LAUNCH();
}

void attention_backward_cuda(DType dtype, const AttentionDims& dims, const void* dout,
                             const void* qkv, const void* out, const void* lse, void* dsum,
                             void* dqkv, int device, cudaStream_t stream) {
  const std::int64_t rows = dims.batch * dims.heads * dims.seq;
  if (rows == 0) return;
  CudaDeviceGuard guard(device);
  dispatch_device_floating(dtype, "attention_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    attention_query_kernel<T, A><<<grid_for(rows), kThreads, 0, stream>>>(
        dims, static_cast<const T*>(dout), static_cast<const T*>(qkv),
        static_cast<const T*>(out), static_cast<const A*>(lse), static_cast<A*>(dsum),
        static_cast<T*>(dqkv));
    ZRT_CUDA_CHECK_LAUNCH();
    attention_key_kernel<T, A><<<grid_for(rows), kThreads, 0, stream>>>(
        dims, static_cast<const T*>(dout), static_cast<const T*>(qkv),
        static_cast<const A*>(lse), static_cast<const A*>(dsum), static_cast<T*>(dqkv));
    ZRT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace zrt::kernels
