#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/nn/attention.cuh"

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
struct AttentionQueryBody {
  using A = acc_t<T>;
  AttentionDims d;
  const T* dout;
  const T* qkv;
  const T* out;
  const A* lse;
  A* dsum;
  T* dqkv;
  __device__ void operator()(std::int64_t r) const {
    attention_backward_query_row<T, A>(d, r, dout, qkv, out, lse, dsum, dqkv);
  }
};

template <class T>
struct AttentionKeyBody {
  using A = acc_t<T>;
  AttentionDims d;
  const T* dout;
  const T* qkv;
  const A* lse;
  const A* dsum;
  T* dqkv;
  __device__ void operator()(std::int64_t r) const {
    attention_backward_key_row<T, A>(d, r, dout, qkv, lse, dsum, dqkv);
  }
};

}  // namespace

void launch_attention_forward(DType dtype, const AttentionDims& dims, const void* qkv, void* out,
                              void* lse, cudaStream_t stream) {
  const std::int64_t rows = dims.batch * dims.heads * dims.seq;
  dispatch<NnFloats>(dtype, "attention_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    for_each_index(rows,
                   AttentionForwardBody<T>{dims, static_cast<const T*>(qkv), static_cast<T*>(out),
                                           static_cast<A*>(lse)},
                   stream);
  });
}

void launch_attention_backward(DType dtype, const AttentionDims& dims, const void* dout,
                               const void* qkv, const void* out, const void* lse, void* dsum,
                               void* dqkv, cudaStream_t stream) {
  const std::int64_t rows = dims.batch * dims.heads * dims.seq;
  dispatch<NnFloats>(dtype, "attention_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    for_each_index(rows,
                   AttentionQueryBody<T>{dims, static_cast<const T*>(dout),
                                         static_cast<const T*>(qkv), static_cast<const T*>(out),
                                         static_cast<const A*>(lse), static_cast<A*>(dsum),
                                         static_cast<T*>(dqkv)},
                   stream);
    for_each_index(rows,
                   AttentionKeyBody<T>{dims, static_cast<const T*>(dout),
                                       static_cast<const T*>(qkv), static_cast<const A*>(lse),
                                       static_cast<const A*>(dsum), static_cast<T*>(dqkv)},
                   stream);
  });
}

}  // namespace zrt::kernels::cuda
