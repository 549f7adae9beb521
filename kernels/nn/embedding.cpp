#include "zrt/kernels/nn/embedding.h"

#include <algorithm>

#include <climits>

#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/kernel_path.h"
#include "zrt/kernels/launch.h"
#include "zrt/kernels/nn/embedding_math.h"
#include "zrt/kernels/nn/id_check.h"
#include "zrt/kernels/nn/nn_checks.h"

#ifdef ZRT_WITH_CUDA
#include "zrt/kernels/nn/embedding.cuh"
#endif

namespace zrt::kernels {
namespace {

struct EmbeddingDims {
  std::int64_t n, batch, seq, vocab, channels, positions;
};

// Checks ids, the table, the optional position table and the activation.
EmbeddingDims embedding_dims(const char* op, const Tensor& ids, const Tensor& wte,
                             const Tensor* wpe, const Tensor& act) {
  check_ids(op, ids);
  ZRT_CHECK_ARG(ids.dim() >= 1, op, ": ", ids.str(), " must be [..., T]");
  ZRT_CHECK_ARG(wte.dim() == 2, op, ": ", wte.str(), " must be [V, C]");
  EmbeddingDims d{ids.numel(), 0, ids.size(-1), wte.size(0), wte.size(1), 0};
  d.batch = d.seq ? d.n / d.seq : 0;
  Shape act_shape = ids.shape();
  act_shape.push_back(d.channels);
  ZRT_CHECK_ARG(act.shape() == act_shape, op, ": ", act.str(), " must be ", shape_str(act_shape));
  if (wpe) {
    check_nn_floats(op, {wte, *wpe, act});
    ZRT_CHECK_ARG(wpe->dim() == 2 && wpe->size(1) == d.channels && wpe->size(0) >= d.seq, op, ": ",
                  wpe->str(), " must be [P, ", d.channels, "] with P >= ", d.seq,
                  ", the sequence length of ", ids.str(),
                  " (a position table of P rows holds "
                  "sequences of up to P tokens)");
    d.positions = wpe->size(0);
  } else {
    check_nn_floats(op, {wte, act});
  }
  return d;
}

// The grouping of positions by token (Note [Deterministic embedding gradient]):
// rows[offsets[v] .. offsets[v+1]) are the positions holding token v, in
// order. Ids outside [0, vocab) (possible only when a device id flag records
// them) are left out.
struct TokenGroups {
  std::vector<std::int64_t> offsets, rows;
};
TokenGroups token_groups(const std::vector<std::int64_t>& tokens, std::int64_t vocab) {
  auto good = [&](std::int64_t t) { return t >= 0 && t < vocab; };
  TokenGroups g{std::vector<std::int64_t>(static_cast<std::size_t>(vocab) + 1, 0), {}};
  for (std::int64_t t : tokens)
    if (good(t)) ++g.offsets[static_cast<std::size_t>(t) + 1];
  for (std::size_t v = 0; v < static_cast<std::size_t>(vocab); ++v)
    g.offsets[v + 1] += g.offsets[v];
  g.rows.resize(static_cast<std::size_t>(g.offsets.back()));
  std::vector<std::int64_t> next(g.offsets.begin(), g.offsets.end() - 1);
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (good(tokens[i]))
      g.rows[static_cast<std::size_t>(next[static_cast<std::size_t>(tokens[i])]++)] =
          static_cast<std::int64_t>(i);
  return g;
}

#ifdef ZRT_WITH_CUDA
// The flag's words on the device, or null (no flag: check on the host).
unsigned long long* flag_words(const Tensor* id_flag) {
  return id_flag ? static_cast<unsigned long long*>(id_flag->data_ptr()) : nullptr;
}
#endif

}  // namespace

void embedding_forward(const Tensor& ids, const Tensor& wte, const Tensor* wpe, const Tensor& out,
                       Stream stream, const Tensor* id_flag) {
  constexpr const char* op = "embedding_forward";
  const EmbeddingDims d = embedding_dims(op, ids, wte, wpe, out);
  if (id_flag) check_id_flag(op, *id_flag, out.device());
  check_apart(op, out, "wte", wte);
  if (wpe) check_apart(op, out, "wpe", *wpe);
  check_apart(op, out, "ids", ids);
  if (d.n * d.channels == 0) return;
  if (wpe)
    check_operands(op, {ids, wte, *wpe, out}, stream);
  else
    check_operands(op, {ids, wte, out}, stream);
  ZRT_CUDA_LAUNCH_AND_RETURN(op, out.device(), [&] {
    if (!id_flag) host_ids(op, ids, d.vocab, /*allow_negative=*/false, stream);
    cuda::launch_embedding_forward(wte.dtype(), d.n, d.channels, d.seq, d.vocab, ids.data_ptr(),
                                   ids.dtype(), wte.data_ptr(), wpe ? wpe->data_ptr() : nullptr,
                                   out.data_ptr(), flag_words(id_flag), cuda_stream(stream));
  }());
  // The CPU twin checks on the host and throws, flag or not (Note [Device id
  // checks]).
  run_cpu_twin(
      stream, op,
      [=](const Tensor& ids, const Tensor& wte, const auto& wpe, const Tensor& out) {
        host_ids(op, ids, d.vocab, /*allow_negative=*/false, {});
        dispatch<NnFloats>(wte.dtype(), op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using A = acc_t<T>;
          dispatch<IdTypes>(ids.dtype(), op, [&](auto id_tag) {
            using I = typename decltype(id_tag)::type;
            const I* pids = ids.template data<I>();
            const T* pwte = wte.template data<T>();
            const T* pwpe = wpe ? wpe->template data<T>() : nullptr;
            T* pout = out.template data<T>();
            parallel_for(d.n * d.channels, d.channels, [&](std::int64_t lo, std::int64_t hi) {
              for (std::int64_t idx = lo; idx < hi; ++idx)
                embedding_forward_element<T, I, A>(idx, d.channels, d.seq, pids, pwte, pwpe, pout);
            });
          });
        });
      },
      ids, wte, wpe, out);
}

void embedding_backward(const Tensor& ids, const Tensor& dout, const Tensor& dwte,
                        const Tensor* dwpe, bool accumulate, Stream stream, const Tensor* id_flag) {
  constexpr const char* op = "embedding_backward";
  const EmbeddingDims d = embedding_dims(op, ids, dwte, dwpe, dout);
  if (id_flag) check_id_flag(op, *id_flag, dout.device());
  for (const Tensor* grad : {&dwte, dwpe})
    if (grad) {
      check_apart(op, *grad, "dout", dout);
      check_apart(op, *grad, "ids", ids);
    }
  if (dwpe) check_disjoint(op, {{"dwte", dwte}, {"dwpe", *dwpe}});
  if (d.n > 0) check_operands(op, {ids, dout}, stream);
  for (const Tensor* grad : {&dwte, dwpe}) {
    if (!grad || grad->numel() == 0) continue;
    check_operands(op, {*grad}, stream);
    ZRT_CHECK_ARG(grad->device() == dout.device(), op, ": ", grad->str(), " is not on ",
                  dout.device(), " like ", dout.str());
  }
  ZRT_CUDA_LAUNCH_AND_RETURN(op, dout.device(), [&] {
    if (!simple_kernel(FastKernel::embedding_backward)) {
      // Groups on the device: no upload, no sync (scratch from dout's
      // allocator in the stream's order).
      ZRT_CHECK_ARG(d.n < INT_MAX && d.vocab < INT_MAX, op, ": ", ids.str(), " and ", d.vocab,
                    " tokens must both be below 2^31 - 1");
      if (!id_flag) host_ids(op, ids, d.vocab, /*allow_negative=*/false, stream);
      const std::size_t bytes =
          cuda::embedding_group_scratch_bytes(d.n, d.vocab, cuda_stream(stream));
      const Tensor scratch = Tensor::empty({static_cast<std::int64_t>(bytes)}, DType::u8,
                                           dout.device(), dout.storage().allocator(), stream);
      const cuda::TokenGroupsDev g = cuda::launch_embedding_group_tokens(
          d.n, d.vocab, d.n ? ids.data_ptr() : nullptr, ids.dtype(), scratch.data_ptr(), bytes,
          flag_words(id_flag), cuda_stream(stream));
      cuda::launch_embedding_backward(
          dwte.dtype(), d.vocab, d.positions, d.batch, d.seq, d.channels, g.offsets,
          d.n ? g.rows : nullptr, d.n ? dout.data_ptr() : nullptr, dwte.data_ptr(),
          dwpe ? dwpe->data_ptr() : nullptr, accumulate, cuda_stream(stream));
      return;
    }
    // The simple version: the grouping on the host. With a flag, the device
    // records the bad ids and the host grouping leaves them out.
    if (id_flag && d.n > 0)
      cuda::launch_embedding_check_ids(d.n, d.vocab, ids.data_ptr(), ids.dtype(),
                                       flag_words(id_flag), cuda_stream(stream));
    const TokenGroups g =
        token_groups(id_flag ? read_host_ids(op, ids, stream)
                             : host_ids(op, ids, d.vocab, /*allow_negative=*/false, stream),
                     d.vocab);
    auto upload = [&](const std::vector<std::int64_t>& v) {
      Tensor host = Tensor::empty({static_cast<std::int64_t>(v.size())}, DType::i64);
      if (!v.empty()) std::copy(v.begin(), v.end(), host.data<std::int64_t>());
      Tensor dev = Tensor::empty(host.shape(), DType::i64, dout.device(),
                                 dout.storage().allocator(), stream);
      dev.copy_(host, stream);
      return dev;
    };
    Tensor dev_offsets = upload(g.offsets), dev_rows = upload(g.rows);
    cuda::launch_embedding_backward(
        dwte.dtype(), d.vocab, d.positions, d.batch, d.seq, d.channels,
        dev_offsets.data<std::int64_t>(), g.rows.empty() ? nullptr : dev_rows.data<std::int64_t>(),
        d.n ? dout.data_ptr() : nullptr, dwte.data_ptr(), dwpe ? dwpe->data_ptr() : nullptr,
        accumulate, cuda_stream(stream));
    // The uploads are stream-ordered; keep them alive until the kernels ran.
    ZRT_CUDA_CHECK(cudaStreamSynchronize(cuda_stream(stream)));
  }());
  run_cpu_twin(
      stream, op,
      [=](const Tensor& ids, const Tensor& dout, const Tensor& dwte, const auto& dwpe) {
        const TokenGroups g =
            token_groups(host_ids(op, ids, d.vocab, /*allow_negative=*/false, {}), d.vocab);
        dispatch<NnFloats>(dwte.dtype(), op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using A = acc_t<T>;
          const T* pdout = d.n ? dout.template data<T>() : nullptr;
          T* pdwte = dwte.numel() > 0 ? dwte.template data<T>() : nullptr;
          parallel_for(d.vocab * d.channels, d.channels, [&](std::int64_t lo, std::int64_t hi) {
            for (std::int64_t idx = lo; idx < hi; ++idx)
              token_grad_element<T, A>(idx, d.channels, g.offsets.data(), g.rows.data(), pdout,
                                       pdwte, accumulate);
          });
          if (!dwpe || d.positions * d.channels == 0) return;
          T* pdwpe = dwpe->template data<T>();
          parallel_for(d.positions * d.channels, d.channels, [&](std::int64_t lo, std::int64_t hi) {
            for (std::int64_t idx = lo; idx < hi; ++idx)
              position_grad_element<T, A>(idx, d.channels, d.batch, d.seq, pdout, pdwpe,
                                          accumulate);
          });
        });
      },
      ids, dout, dwte, dwpe);
}

}  // namespace zrt::kernels
