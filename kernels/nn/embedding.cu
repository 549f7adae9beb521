#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/nn/embedding.cuh"
#include "zrt/kernels/nn/embedding_math.h"

namespace zrt::kernels::cuda {
namespace {

template <class T, class I>
struct EmbeddingForwardBody {
  std::int64_t channels, seq;
  const I* ids;
  const T* wte;
  const T* wpe;
  T* out;
  __device__ void operator()(std::int64_t idx) const {
    embedding_forward_element<T, I, acc_t<T>>(idx, channels, seq, ids, wte, wpe, out);
  }
};

template <class T>
struct TokenGradBody {
  std::int64_t channels;
  const std::int64_t* offsets;
  const std::int64_t* rows;
  const T* dout;
  T* dwte;
  bool accumulate;
  __device__ void operator()(std::int64_t idx) const {
    token_grad_element<T, acc_t<T>>(idx, channels, offsets, rows, dout, dwte, accumulate);
  }
};

template <class T>
struct PositionGradBody {
  std::int64_t channels, batch, seq;
  const T* dout;
  T* dwpe;
  bool accumulate;
  __device__ void operator()(std::int64_t idx) const {
    position_grad_element<T, acc_t<T>>(idx, channels, batch, seq, dout, dwpe, accumulate);
  }
};

}  // namespace

void launch_embedding_forward(DType dtype, std::int64_t n, std::int64_t channels, std::int64_t seq,
                              const void* ids, DType ids_dtype, const void* wte, const void* wpe,
                              void* out, cudaStream_t stream) {
  dispatch<NnFloats>(dtype, "embedding_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch<IdTypes>(ids_dtype, "embedding_forward", [&](auto id_tag) {
      using I = typename decltype(id_tag)::type;
      for_each_index(n * channels,
                     EmbeddingForwardBody<T, I>{channels, seq, static_cast<const I*>(ids),
                                                static_cast<const T*>(wte),
                                                static_cast<const T*>(wpe), static_cast<T*>(out)},
                     stream);
    });
  });
}

void launch_embedding_backward(DType dtype, std::int64_t vocab, std::int64_t positions,
                               std::int64_t batch, std::int64_t seq, std::int64_t channels,
                               const std::int64_t* offsets, const std::int64_t* rows,
                               const void* dout, void* dwte, void* dwpe, bool accumulate,
                               cudaStream_t stream) {
  dispatch<NnFloats>(dtype, "embedding_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    for_each_index(vocab * channels,
                   TokenGradBody<T>{channels, offsets, rows, static_cast<const T*>(dout),
                                    static_cast<T*>(dwte), accumulate},
                   stream);
    if (dwpe) {
      for_each_index(positions * channels,
                     PositionGradBody<T>{channels, batch, seq, static_cast<const T*>(dout),
                                         static_cast<T*>(dwpe), accumulate},
                     stream);
    }
  });
}

}  // namespace zrt::kernels::cuda
