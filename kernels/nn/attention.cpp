#include "zrt/kernels/nn/attention.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "zrt/kernels/cpu_isa/isa_kernels.h"
#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/kernel_path.h"
#include "zrt/kernels/launch.h"
#include "zrt/kernels/nn/attention_gemm.h"
#include "zrt/kernels/nn/attention_math.h"
#include "zrt/kernels/nn/attention_path.h"
#include "zrt/kernels/nn/cpu_widen.h"
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
  ZRT_CHECK_ARG(qkv.dim() == 3 && qkv.size(2) % 3 == 0, op, ": ", qkv.str(), " must be [B, T, 3C]");
  AttentionDims d{qkv.size(0), qkv.size(1), qkv.size(2) / 3, n_head, 0};
  ZRT_CHECK_ARG(n_head > 0 && d.channels % n_head == 0, op, ": ", n_head, " heads do not divide ",
                d.channels, " channels");
  d.head_dim = d.channels / n_head;
  ZRT_CHECK_ARG(d.head_dim <= kMaxAttentionHeadDim, op, ": head dim ", d.head_dim,
                " exceeds the supported ", kMaxAttentionHeadDim);
  ZRT_CHECK_ARG(out.shape() == Shape({d.batch, d.seq, d.channels}), op, ": ", out.str(),
                " must be [", d.batch, ", ", d.seq, ", ", d.channels, "]");
  check_dtype(op, lse, acc_dtype(qkv.dtype()));
  check_numel(op, lse, d.batch * d.heads * d.seq);
  return d;
}

// The CPU twin (Note [Blocked CPU attention]): the instruction-set copy's
// kernel over (batch, head) pairs split across threads, each pair costing
// about T²·hd units of work.
template <class A>
void attention_cpu(bool backward, const AttentionCall<A>& call) {
  const IsaTable<A>& table = isa_kernels().table<A>();
  const auto kernel = backward ? table.attention_backward : table.attention_forward;
  const AttentionDims& d = call.dims;
  const std::int64_t pairs = d.batch * d.heads;
  const std::int64_t cost = std::max<std::int64_t>(d.seq * d.seq * d.head_dim, 1);
  parallel_for(pairs * cost, cost, [&](std::int64_t lo, std::int64_t hi) {
    AttentionCall<A> range = call;
    range.pair_begin = lo / cost;
    range.pair_end = hi / cost;
    kernel(range);
  });
}

// The path this call takes (Note [Attention paths]).
AttentionChoice attention_choice(const AttentionDims& d, const Tensor& qkv) {
  AttentionQuery q;
  q.cuda = qkv.device().is_cuda() || planning_cuda_kernels();
  q.compute_capability = qkv.device().is_cuda() ? cuda_compute_capability(qkv.device()) : 0;
  q.dims = d;
  q.dtype = qkv.dtype();
  q.simple = simple_kernel(FastKernel::attention);
  q.forced = forced_attention_path();
  return choose_attention_path(q);
}

}  // namespace

void attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& lse, std::int64_t n_head,
                       Stream stream) {
  constexpr const char* op = "attention_forward";
  const AttentionDims d = attention_dims(op, qkv, out, lse, n_head);
  if (qkv.numel() == 0) return;
  check_operands(op, {qkv, out, lse}, stream);
  // Every path reads qkv after writing some of out.
  ZRT_CHECK_ARG(!out.shares_storage(qkv), op, ": ", out.str(), " must not share memory with ",
                qkv.str());
  const AttentionChoice choice = attention_choice(d, qkv);
  if (choice.path == AttentionPath::gemm)
    return attention_gemm_forward(d, choice, qkv, out, lse, stream);
  if (choice.path == AttentionPath::flash)
    ZRT_CUDA_LAUNCH_AND_RETURN(
        op, qkv.device(),
        cuda::launch_flash_attention_forward(qkv.dtype(), d, qkv.data_ptr(), out.data_ptr(),
                                             lse.data_ptr(), cuda_stream(stream)));
  ZRT_CUDA_LAUNCH_AND_RETURN(
      op, qkv.device(),
      cuda::launch_attention_forward(qkv.dtype(), d, qkv.data_ptr(), out.data_ptr(), lse.data_ptr(),
                                     choice.path == AttentionPath::simple, cuda_stream(stream)));
  run_cpu_twin(
      stream, op,
      [=](const Tensor& qkv, const Tensor& out, const Tensor& lse) {
        dispatch<NnFloats>(qkv.dtype(), op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using A = acc_t<T>;
          A* plse = lse.data<A>();
          if constexpr (std::is_same_v<T, A>) {
            attention_cpu<A>(false,
                             {d, 0, 0, qkv.data<A>(), out.data<A>(), plse, nullptr, nullptr});
          } else {
            const std::vector<A> wide_qkv = widened<A>(qkv.data<T>(), qkv.numel());
            std::vector<A> wide_out(static_cast<std::size_t>(out.numel()));
            attention_cpu<A>(false,
                             {d, 0, 0, wide_qkv.data(), wide_out.data(), plse, nullptr, nullptr});
            store_all(wide_out.data(), out.data<T>(), out.numel());
          }
        });
      },
      qkv, out, lse);
}

void attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& out, const Tensor& lse,
                        const Tensor& dqkv, std::int64_t n_head, Stream stream) {
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
  const AttentionChoice choice = attention_choice(d, qkv);
  if (choice.path == AttentionPath::gemm)
    return attention_gemm_backward(d, choice, dout, qkv, lse, dqkv, stream);
  // Row sums D of the query pass (Note [Attention without the T×T matrix]).
  Tensor dsum =
      Tensor::empty(lse.shape(), lse.dtype(), lse.device(), lse.storage().allocator(), stream);
  if (choice.path == AttentionPath::flash)
    ZRT_CUDA_LAUNCH_AND_RETURN(
        op, qkv.device(),
        cuda::launch_flash_attention_backward(qkv.dtype(), d, dout.data_ptr(), qkv.data_ptr(),
                                              out.data_ptr(), lse.data_ptr(), dsum.data_ptr(),
                                              dqkv.data_ptr(), cuda_stream(stream)));
  ZRT_CUDA_LAUNCH_AND_RETURN(op, qkv.device(),
                             cuda::launch_attention_backward(
                                 qkv.dtype(), d, dout.data_ptr(), qkv.data_ptr(), out.data_ptr(),
                                 lse.data_ptr(), dsum.data_ptr(), dqkv.data_ptr(),
                                 choice.path == AttentionPath::simple, cuda_stream(stream)));
  run_cpu_twin(
      stream, op,
      [=](const Tensor& dout, const Tensor& qkv, const Tensor& out, const Tensor& lse,
          const Tensor& dqkv) {
        dispatch<NnFloats>(qkv.dtype(), op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using A = acc_t<T>;
          A* plse = lse.data<A>();
          if constexpr (std::is_same_v<T, A>) {
            attention_cpu<A>(true, {d, 0, 0, qkv.data<A>(), out.data<A>(), plse, dout.data<A>(),
                                    dqkv.data<A>()});
          } else {
            const std::vector<A> wide_qkv = widened<A>(qkv.data<T>(), qkv.numel());
            std::vector<A> wide_out = widened<A>(out.data<T>(), out.numel());
            const std::vector<A> wide_dout = widened<A>(dout.data<T>(), dout.numel());
            std::vector<A> wide_dqkv(static_cast<std::size_t>(dqkv.numel()));
            attention_cpu<A>(true, {d, 0, 0, wide_qkv.data(), wide_out.data(), plse,
                                    wide_dout.data(), wide_dqkv.data()});
            store_all(wide_dqkv.data(), dqkv.data<T>(), dqkv.numel());
          }
        });
      },
      dout, qkv, out, lse, dqkv);
}

}  // namespace zrt::kernels
