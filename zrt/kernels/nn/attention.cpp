#include "zrt/kernels/nn/attention.h"

#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/launch.h"
#include "zrt/kernels/nn/attention_math.h"
#include "zrt/kernels/nn/nn_checks.h"

#ifdef ZRT_WITH_CUDA
#include "zrt/kernels/nn/attention.cuh"
#endif

namespace zrt::kernels {
namespace {

// Checks qkv, out and lse against each other; returns the dims.
AttentionDims attention_dims(const char* op, const Tensor& qkv, const Tensor& out,
                             const Tensor& lse, std::int64_t n_head) {
  check_nn_floats(op, {qkv, out});
  ZRT_CHECK_ARG(qkv.dim() == 3 && qkv.size(2) % 3 == 0, op, ": ", qkv.str(),
                " must be [B, T, 3C]");
  AttentionDims d{qkv.size(0), qkv.size(1), qkv.size(2) / 3, n_head, 0};
  ZRT_CHECK_ARG(n_head > 0 && d.channels % n_head == 0, op, ": ", n_head,
                " heads do not divide ", d.channels, " channels");
  d.head_dim = d.channels / n_head;
  ZRT_CHECK_ARG(d.head_dim <= kMaxAttentionHeadDim, op, ": head dim ", d.head_dim,
                " exceeds the supported ", kMaxAttentionHeadDim);
  ZRT_CHECK_ARG(out.shape() == Shape({d.batch, d.seq, d.channels}), op, ": ", out.str(),
                " must be [", d.batch, ", ", d.seq, ", ", d.channels, "]");
  check_dtype(op, lse, acc_dtype(qkv.dtype()));
  check_numel(op, lse, d.batch * d.heads * d.seq);
  return d;
}

// Runs row(r) for every row r of B*H*T, threads splitting rows; each row
// costs about T units of work, which is what the chunking sees.
template <class F>
void for_each_attention_row(const AttentionDims& d, const F& row) {
  const std::int64_t rows = d.batch * d.heads * d.seq, seq = std::max<std::int64_t>(d.seq, 1);
  parallel_for(rows * seq, seq, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo / seq; r < hi / seq; ++r) row(r);
  });
}

}  // namespace

void attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                       std::int64_t n_head, Stream stream) {
  constexpr const char* op = "attention_forward";
  const AttentionDims d = attention_dims(op, qkv, out, lse, n_head);
  if (qkv.numel() == 0) return;
  check_operands(op, {qkv, out, lse}, stream);
  ZRT_CUDA_LAUNCH_AND_RETURN(op, qkv.device(),
      cuda::launch_attention_forward(qkv.dtype(), d, qkv.data_ptr(), out.data_ptr(),
                                     lse.data_ptr(), cuda_stream(stream)));
  dispatch<NnFloats>(qkv.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const T* pqkv = qkv.data<T>();
    T* pout = out.data<T>();
    A* plse = lse.data<A>();
    for_each_attention_row(d, [&](std::int64_t r) { attention_forward_row<T, A>(d, r, pqkv, pout, plse); });
  });
}

void attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& out,
                        const Tensor& lse, const Tensor& dqkv, std::int64_t n_head,
                        Stream stream) {
  constexpr const char* op = "attention_backward";
  const AttentionDims d = attention_dims(op, qkv, out, lse, n_head);
  check_nn_floats(op, {qkv, dout, dqkv});
  ZRT_CHECK_ARG(dout.shape() == out.shape(), op, ": ", dout.str(), " must match ", out.str());
  ZRT_CHECK_ARG(dqkv.shape() == qkv.shape(), op, ": ", dqkv.str(), " must match ", qkv.str());
  if (qkv.numel() == 0) return;
  check_operands(op, {dout, qkv, out, lse, dqkv}, stream);
  // The query pass writes dq while the key pass still reads q.
  ZRT_CHECK_ARG(!dqkv.shares_storage(qkv), op, ": ", dqkv.str(), " must not share memory with ",
                qkv.str());
  // Row sums D of the query pass (Note [Attention without the T×T matrix]).
  Tensor dsum = Tensor::empty(lse.shape(), lse.dtype(), lse.device(),
                              lse.storage().allocator(), stream);
  ZRT_CUDA_LAUNCH_AND_RETURN(op, qkv.device(),
      cuda::launch_attention_backward(qkv.dtype(), d, dout.data_ptr(), qkv.data_ptr(),
                                      out.data_ptr(), lse.data_ptr(), dsum.data_ptr(),
                                      dqkv.data_ptr(), cuda_stream(stream)));
  dispatch<NnFloats>(qkv.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const T* pdout = dout.data<T>();
    const T* pqkv = qkv.data<T>();
    const T* pout = out.data<T>();
    const A* plse = lse.data<A>();
    A* pdsum = dsum.data<A>();
    T* pdqkv = dqkv.data<T>();
    for_each_attention_row(d, [&](std::int64_t r) {
      attention_backward_query_row<T, A>(d, r, pdout, pqkv, pout, plse, pdsum, pdqkv);
    });
    for_each_attention_row(d, [&](std::int64_t r) {
      attention_backward_key_row<T, A>(d, r, pdout, pqkv, plse, pdsum, pdqkv);
    });
  });
}

}  // namespace zrt::kernels
