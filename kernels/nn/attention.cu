#include <algorithm>

#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/nn/attention.cuh"
#include "zrt/kernels/nn/attention_tiles_math.h"
#include "zrt/kernels/nn/smem_launch.cuh"

namespace zrt::kernels::cuda {
namespace {

// A thread per row of B*H*T, as the CPU twin's rows over threads.
template <class T>
struct AttentionForwardBody {
  using A = acc_t<T>;
  AttentionDims d;
  const T* qkv;
  T* out;
  A* lse;
  __device__ void operator()(std::int64_t r) const {
    attention_forward_row<T, A>(d, r, qkv, out, lse);
  }
};

template <class T>
using BackwardArgs = AttentionBackwardArgs<T, acc_t<T>>;

template <class T>
struct AttentionQueryBody {
  BackwardArgs<T> a;
  __device__ void operator()(std::int64_t r) const {
    attention_backward_query_row<T, acc_t<T>>(a.d, r, a.dout, a.qkv, a.out, a.lse, a.dsum, a.dqkv);
  }
};

template <class T>
struct AttentionKeyBody {
  BackwardArgs<T> a;
  __device__ void operator()(std::int64_t r) const {
    attention_backward_key_row<T, acc_t<T>>(a.d, r, a.dout, a.qkv, a.lse, a.dsum, a.dqkv);
  }
};

// A thread block as the tile functions' Block (attention_tiles_math.h):
// threads stride over a tile's indices; sync is a block barrier.
struct AttentionDeviceBlock {
  template <class F>
  ZRT_HD void for_each(int n, const F& f) const {
#if defined(__CUDA_ARCH__)
    for (int i = int(threadIdx.x); i < n; i += int(blockDim.x)) f(i);
#else
    (void)n;
    (void)f;
#endif
  }
  ZRT_HD void sync() const {
#if defined(__CUDA_ARCH__)
    __syncthreads();
#endif
  }
};

// Fast forward: a block per (pair, query tile), pairs outermost.
template <class T, class A>
__global__ void __launch_bounds__(kAttnThreads)
    attention_forward_tiled_kernel(AttentionDims d, std::int64_t tiles, const T* qkv, T* out,
                                   A* lse) {
  extern __shared__ __align__(16) unsigned char attention_smem[];
  const std::int64_t block = blockIdx.x;
  attention_forward_tile<T, A>(AttentionDeviceBlock{}, d, block / tiles, block % tiles, qkv, out,
                               lse, reinterpret_cast<A*>(attention_smem));
}

// D = dout·out per row, the order of the simple query pass.
template <class T>
struct AttentionRowSumBody {
  BackwardArgs<T> a;
  __device__ void operator()(std::int64_t r) const {
    a.dsum[r] = attention_row_dsum<T, acc_t<T>>(a.d, r, a.dout, a.out);
  }
};

// Fast backward: a block per (pair, key/value tile) for dK and dV (kKeys),
// or per (pair, query tile) for dQ.
template <class T, class A, bool kKeys>
__global__ void __launch_bounds__(kAttnThreads)
    attention_backward_tiled_kernel(AttentionBackwardArgs<T, A> a, std::int64_t tiles) {
  extern __shared__ __align__(16) unsigned char attention_smem[];
  const std::int64_t block = blockIdx.x;
  A* smem = reinterpret_cast<A*>(attention_smem);
  if constexpr (kKeys)
    attention_backward_kv_tile<T, A>(AttentionDeviceBlock{}, a, block / tiles, block % tiles, smem);
  else
    attention_backward_q_tile<T, A>(AttentionDeviceBlock{}, a, block / tiles, block % tiles, smem);
}

}  // namespace

void launch_attention_forward(DType dtype, const AttentionDims& dims, const void* qkv, void* out,
                              void* lse, bool simple, cudaStream_t stream) {
  const std::int64_t rows = dims.batch * dims.heads * dims.seq;
  dispatch<NnFloats>(dtype, "attention_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const std::int64_t bytes = attention_forward_smem(dims.head_dim) * std::int64_t(sizeof(A));
    if (!simple && bytes <= max_block_smem()) {
      const std::int64_t tiles = attention_tiles(dims.seq, kAttnBr);
      launch_with_smem(attention_forward_tiled_kernel<T, A>, dims.batch * dims.heads * tiles,
                       kAttnThreads, bytes, stream, dims, tiles, static_cast<const T*>(qkv),
                       static_cast<T*>(out), static_cast<A*>(lse));
      return;
    }
    for_each_index(rows,
                   AttentionForwardBody<T>{dims, static_cast<const T*>(qkv), static_cast<T*>(out),
                                           static_cast<A*>(lse)},
                   stream);
  });
}

void launch_attention_backward(DType dtype, const AttentionDims& dims, const void* dout,
                               const void* qkv, const void* out, const void* lse, void* dsum,
                               void* dqkv, bool simple, cudaStream_t stream) {
  const std::int64_t rows = dims.batch * dims.heads * dims.seq;
  dispatch<NnFloats>(dtype, "attention_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const std::int64_t kv_bytes =
        attention_backward_kv_smem(dims.head_dim) * std::int64_t(sizeof(A));
    const std::int64_t q_bytes = attention_backward_q_smem(dims.head_dim) * std::int64_t(sizeof(A));
    const BackwardArgs<T> a(dims, dout, qkv, out, lse, dsum, dqkv);
    if (!simple && std::max(kv_bytes, q_bytes) <= max_block_smem()) {
      for_each_index(rows, AttentionRowSumBody<T>{a}, stream);
      const std::int64_t pairs = dims.batch * dims.heads;
      const std::int64_t kv_tiles = attention_tiles(dims.seq, kAttnBc);
      const std::int64_t q_tiles = attention_tiles(dims.seq, kAttnBr);
      launch_with_smem(attention_backward_tiled_kernel<T, A, true>, pairs * kv_tiles, kAttnThreads,
                       kv_bytes, stream, a, kv_tiles);
      launch_with_smem(attention_backward_tiled_kernel<T, A, false>, pairs * q_tiles, kAttnThreads,
                       q_bytes, stream, a, q_tiles);
      return;
    }
    for_each_index(rows, AttentionQueryBody<T>{a}, stream);
    for_each_index(rows, AttentionKeyBody<T>{a}, stream);
  });
}

}  // namespace zrt::kernels::cuda
