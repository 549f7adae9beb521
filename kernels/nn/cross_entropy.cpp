#include "zrt/kernels/nn/cross_entropy.h"

#include <algorithm>

#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/kernel_path.h"
#include "zrt/kernels/launch.h"
#include "zrt/kernels/nn/block_sum_math.h"
#include "zrt/kernels/nn/cross_entropy_math.h"
#include "zrt/kernels/nn/id_check.h"
#include "zrt/kernels/nn/nn_checks.h"

#ifdef ZRT_WITH_CUDA
#include "zrt/kernels/nn/cross_entropy.cuh"
#endif

namespace zrt::kernels {
namespace {

struct CrossEntropyDims {
  std::int64_t rows, vocab;
};

CrossEntropyDims cross_entropy_dims(const char* op, const Tensor& logits, const Tensor& targets,
                                    const Tensor& lse, double normaliser) {
  check_nn_floats(op, {logits});
  check_ids(op, targets);
  ZRT_CHECK_ARG(logits.dim() >= 1 && logits.size(-1) > 0, op, ": ", logits.str(),
                " must be [..., V] with V > 0");
  CrossEntropyDims d{matrix_rows(logits), logits.size(-1)};
  check_numel(op, targets, d.rows);
  check_dtype(op, lse, acc_dtype(logits.dtype()));
  check_numel(op, lse, d.rows);
  ZRT_CHECK_ARG(normaliser > 0, op, ": normaliser must be positive, got ", normaliser);
  return d;
}

#ifdef ZRT_WITH_CUDA
unsigned long long* flag_words(const Tensor* id_flag) {
  return id_flag ? static_cast<unsigned long long*>(id_flag->data_ptr()) : nullptr;
}
#endif

}  // namespace

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, double normaliser,
                           const Tensor& losses, const Tensor& lse, const Tensor& loss,
                           Stream stream, const Tensor* id_flag) {
  constexpr const char* op = "cross_entropy_forward";
  const CrossEntropyDims d = cross_entropy_dims(op, logits, targets, lse, normaliser);
  check_dtype(op, losses, lse.dtype());
  check_numel(op, losses, d.rows);
  check_dtype(op, loss, lse.dtype());
  check_numel(op, loss, 1);
  check_ids(op, targets);
  if (id_flag) check_id_flag(op, *id_flag, loss.device());
  if (d.rows > 0) check_operands(op, {logits, targets, losses, lse, loss}, stream);
  else check_operands(op, {loss}, stream);
  ZRT_CUDA_LAUNCH_AND_RETURN(op, loss.device(), [&] {
    if (!id_flag) host_ids(op, targets, d.vocab, /*allow_negative=*/true, stream);
    // Scratch for the loss mean's block partials (Note [Deterministic block
    // sums]), from the loss's allocator in the stream's order.
    const bool simple = simple_kernel(FastKernel::cross_entropy) || d.rows == 0;
    const Tensor partials = simple ? Tensor()
                                   : Tensor::empty({block_sum_chunks(d.rows)}, loss.dtype(), loss.device(),
                                                   loss.storage().allocator(), stream);
    cuda::launch_cross_entropy_forward(logits.dtype(), d.rows, d.vocab, d.rows ? logits.data_ptr() : nullptr,
                                       d.rows ? targets.data_ptr() : nullptr, targets.dtype(), normaliser,
                                       d.rows ? losses.data_ptr() : nullptr, d.rows ? lse.data_ptr() : nullptr,
                                       loss.data_ptr(), simple ? nullptr : partials.data_ptr(), simple,
                                       flag_words(id_flag), cuda_stream(stream));
  }());
  // The CPU twin checks on the host and throws, flag or not (Note [Device id
  // checks]).
  run_cpu_twin(stream, op, [=](const Tensor& logits, const Tensor& targets, const Tensor& losses,
                               const Tensor& lse, const Tensor& loss) {
    dispatch<NnFloats>(logits.dtype(), op, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using A = acc_t<T>;
      host_ids(op, targets, d.vocab, /*allow_negative=*/true, {});
      A* ploss = loss.data<A>();
      if (d.rows == 0) {
        *ploss = A(0);
        return;
      }
      const T* x = logits.data<T>();
      A* plosses = losses.data<A>();
      A* plse = lse.data<A>();
      dispatch<IdTypes>(targets.dtype(), op, [&](auto id_tag) {
        const auto* t = targets.data<typename decltype(id_tag)::type>();
        parallel_for(d.rows * d.vocab, d.vocab, [&](std::int64_t lo, std::int64_t hi) {
          for (std::int64_t r = lo / d.vocab; r < hi / d.vocab; ++r) {
            const T* xr = x + r * d.vocab;
            A m = load<A>(xr[0]);
            for (std::int64_t i = 1; i < d.vocab; ++i) m = std::max(m, load<A>(xr[i]));
            A s = 0;
            for (std::int64_t i = 0; i < d.vocab; ++i) s += exp_(load<A>(xr[i]) - m);
            const A row_lse = m + log_(s);
            const std::int64_t target = static_cast<std::int64_t>(t[r]);
            plse[r] = row_lse;
            plosses[r] = target < 0 ? A(0) : row_lse - load<A>(xr[target]);
          }
        });
      });
      A sum = 0;
      for (std::int64_t r = 0; r < d.rows; ++r) sum += plosses[r];
      *ploss = sum / A(normaliser);
    });
  }, logits, targets, losses, lse, loss);
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            double dloss, double normaliser, const Tensor& dlogits,
                            Stream stream, const Tensor* id_flag) {
  constexpr const char* op = "cross_entropy_backward";
  const CrossEntropyDims d = cross_entropy_dims(op, logits, targets, lse, normaliser);
  check_nn_floats(op, {logits, dlogits});
  ZRT_CHECK_ARG(dlogits.shape() == logits.shape(), op, ": ", dlogits.str(), " must match ",
                logits.str());
  if (id_flag) check_id_flag(op, *id_flag, dlogits.device());
  if (d.rows == 0) return;
  check_ids(op, targets);
  check_operands(op, {logits, targets, lse, dlogits}, stream);
  const double scale = dloss / normaliser;
  ZRT_CUDA_LAUNCH_AND_RETURN(op, logits.device(), [&] {
    if (!id_flag) host_ids(op, targets, d.vocab, /*allow_negative=*/true, stream);
    cuda::launch_cross_entropy_backward(logits.dtype(), d.rows, d.vocab, logits.data_ptr(),
                                        targets.data_ptr(), targets.dtype(), lse.data_ptr(), scale,
                                        dlogits.data_ptr(), flag_words(id_flag), cuda_stream(stream));
  }());
  run_cpu_twin(stream, op, [=](const Tensor& logits, const Tensor& targets, const Tensor& lse,
                               const Tensor& dlogits) {
    dispatch<NnFloats>(logits.dtype(), op, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using A = acc_t<T>;
      host_ids(op, targets, d.vocab, /*allow_negative=*/true, {});
      const T* x = logits.data<T>();
      const A* plse = lse.data<A>();
      T* dx = dlogits.data<T>();
      dispatch<IdTypes>(targets.dtype(), op, [&](auto id_tag) {
        const auto* t = targets.data<typename decltype(id_tag)::type>();
        parallel_for(d.rows * d.vocab, d.vocab, [&](std::int64_t lo, std::int64_t hi) {
          for (std::int64_t idx = lo; idx < hi; ++idx) {
            const std::int64_t r = idx / d.vocab, i = idx % d.vocab;
            const std::int64_t target = static_cast<std::int64_t>(t[r]);
            dx[idx] = target < 0 ? store<T>(A(0))
                                 : store<T>(cross_entropy_dlogit(load<A>(x[idx]), plse[r],
                                                                 i == target, A(scale)));
          }
        });
      });
    });
  }, logits, targets, lse, dlogits);
}

}  // namespace zrt::kernels
