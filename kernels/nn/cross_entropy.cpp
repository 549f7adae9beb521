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

// Scratch for the loss mean's block partials (Note [Deterministic block
// sums]), from the loss's allocator in the stream's order; none for the
// simple mean.
Tensor mean_partials(const Tensor& loss, std::int64_t rows, bool simple, Stream stream) {
  return simple ? Tensor()
                : Tensor::empty({block_sum_chunks(rows)}, loss.dtype(), loss.device(),
                                loss.storage().allocator(), stream);
}
#endif

// log Σ exp over a row's first `vocab` logits: the max, then the sum.
template <class T, class A = acc_t<T>>
A row_lse(const T* xr, std::int64_t vocab) {
  A m = load<A>(xr[0]);
  for (std::int64_t i = 1; i < vocab; ++i) m = std::max(m, load<A>(xr[i]));
  A s = 0;
  for (std::int64_t i = 0; i < vocab; ++i) s += exp_(load<A>(xr[i]) - m);
  return m + log_(s);
}

// The CPU twins' loss mean: the rows in order.
template <class A>
void mean_of_losses(const A* losses, std::int64_t rows, double normaliser, A* loss) {
  A sum = 0;
  for (std::int64_t r = 0; r < rows; ++r) sum += losses[r];
  *loss = sum / A(normaliser);
}

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
  if (d.rows > 0)
    check_operands(op, {logits, targets, losses, lse, loss}, stream);
  else
    check_operands(op, {loss}, stream);
  ZRT_CUDA_LAUNCH_AND_RETURN(op, loss.device(), [&] {
    if (!id_flag) host_ids(op, targets, d.vocab, /*allow_negative=*/true, stream);
    const bool simple = simple_kernel(FastKernel::cross_entropy) || d.rows == 0;
    const Tensor partials = mean_partials(loss, d.rows, simple, stream);
    cuda::launch_cross_entropy_forward(
        logits.dtype(), d.rows, d.vocab, d.rows ? logits.data_ptr() : nullptr,
        d.rows ? targets.data_ptr() : nullptr, targets.dtype(), normaliser,
        d.rows ? losses.data_ptr() : nullptr, d.rows ? lse.data_ptr() : nullptr, loss.data_ptr(),
        simple ? nullptr : partials.data_ptr(), simple, flag_words(id_flag), cuda_stream(stream));
  }());
  // The CPU twin checks on the host and throws, flag or not (Note [Device id
  // checks]).
  run_cpu_twin(
      stream, op,
      [=](const Tensor& logits, const Tensor& targets, const Tensor& losses, const Tensor& lse,
          const Tensor& loss) {
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
                const A lse_r = row_lse(xr, d.vocab);
                const std::int64_t target = static_cast<std::int64_t>(t[r]);
                plse[r] = lse_r;
                plosses[r] = target < 0 ? A(0) : lse_r - load<A>(xr[target]);
              }
            });
          });
          mean_of_losses(plosses, d.rows, normaliser, ploss);
        });
      },
      logits, targets, losses, lse, loss);
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            double dloss, double normaliser, const Tensor& dlogits, Stream stream,
                            const Tensor* id_flag) {
  constexpr const char* op = "cross_entropy_backward";
  const CrossEntropyDims d = cross_entropy_dims(op, logits, targets, lse, normaliser);
  check_nn_floats(op, {logits, dlogits});
  ZRT_CHECK_ARG(dlogits.shape() == logits.shape(), op, ": ", dlogits.str(), " must match ",
                logits.str());
  if (id_flag) check_id_flag(op, *id_flag, dlogits.device());
  check_apart(op, dlogits, "logits", logits, /*in_place=*/true);
  check_apart(op, dlogits, "targets", targets);
  check_apart(op, dlogits, "lse", lse);
  if (d.rows == 0) return;
  check_ids(op, targets);
  check_operands(op, {logits, targets, lse, dlogits}, stream);
  const double scale = dloss / normaliser;
  ZRT_CUDA_LAUNCH_AND_RETURN(op, logits.device(), [&] {
    if (!id_flag) host_ids(op, targets, d.vocab, /*allow_negative=*/true, stream);
    cuda::launch_cross_entropy_backward(
        logits.dtype(), d.rows, d.vocab, logits.data_ptr(), targets.data_ptr(), targets.dtype(),
        lse.data_ptr(), scale, dlogits.data_ptr(), flag_words(id_flag), cuda_stream(stream));
  }());
  run_cpu_twin(
      stream, op,
      [=](const Tensor& logits, const Tensor& targets, const Tensor& lse, const Tensor& dlogits) {
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
      },
      logits, targets, lse, dlogits);
}

void cross_entropy_fused(const Tensor& logits, const Tensor& targets, std::int64_t vocab,
                         double normaliser, double dloss, const Tensor& losses, const Tensor& loss,
                         const Tensor& dlogits, Stream stream, const Tensor* id_flag) {
  constexpr const char* op = "cross_entropy_fused";
  check_nn_floats(op, {logits, dlogits});
  check_ids(op, targets);
  ZRT_CHECK_ARG(logits.dim() >= 1 && logits.size(-1) > 0, op, ": ", logits.str(),
                " must be [..., V] with V > 0");
  const std::int64_t rows = matrix_rows(logits), cols = logits.size(-1);
  if (vocab == 0) vocab = cols;
  ZRT_CHECK_ARG(vocab > 0 && vocab <= cols, op, ": vocabulary ", vocab, " is not within the ", cols,
                " columns of ", logits.str());
  ZRT_CHECK_ARG(dlogits.shape() == logits.shape() && dlogits.dtype() == logits.dtype(), op, ": ",
                dlogits.str(), " must match ", logits.str());
  ZRT_CHECK_ARG(normaliser > 0, op, ": normaliser must be positive, got ", normaliser);
  check_numel(op, targets, rows);
  check_dtype(op, losses, acc_dtype(logits.dtype()));
  check_numel(op, losses, rows);
  check_dtype(op, loss, losses.dtype());
  check_numel(op, loss, 1);
  check_apart(op, dlogits, "logits", logits, /*in_place=*/true);
  for (const Tensor* out : {&dlogits, &losses, &loss}) check_apart(op, *out, "targets", targets);
  for (const Tensor* out : {&losses, &loss}) check_apart(op, *out, "logits", logits);
  check_disjoint(op, {{"dlogits", dlogits}, {"losses", losses}, {"loss", loss}});
  if (id_flag) check_id_flag(op, *id_flag, loss.device());
  if (rows > 0)
    check_operands(op, {logits, targets, losses, loss, dlogits}, stream);
  else
    check_operands(op, {loss}, stream);
  const double scale = dloss / normaliser;
  ZRT_CUDA_LAUNCH_AND_RETURN(op, loss.device(), [&] {
    if (!id_flag && rows > 0) host_ids(op, targets, vocab, /*allow_negative=*/true, stream);
    const bool simple = simple_kernel(FastKernel::cross_entropy) || rows == 0;
    const Tensor partials = mean_partials(loss, rows, simple, stream);
    cuda::launch_cross_entropy_fused(
        logits.dtype(), rows, vocab, cols, rows ? logits.data_ptr() : nullptr,
        rows ? targets.data_ptr() : nullptr, targets.dtype(), normaliser, scale,
        rows ? losses.data_ptr() : nullptr, loss.data_ptr(), rows ? dlogits.data_ptr() : nullptr,
        simple ? nullptr : partials.data_ptr(), simple, flag_words(id_flag), cuda_stream(stream));
  }());
  // The forward's and the backward's arithmetic, row by row: each row's
  // statistics and loss are taken before its gradient overwrites it.
  run_cpu_twin(
      stream, op,
      [=](const Tensor& logits, const Tensor& targets, const Tensor& losses, const Tensor& loss,
          const Tensor& dlogits) {
        dispatch<NnFloats>(logits.dtype(), op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using A = acc_t<T>;
          if (rows > 0) host_ids(op, targets, vocab, /*allow_negative=*/true, {});
          A* plosses = rows ? losses.data<A>() : nullptr;
          const T* x = rows ? logits.data<T>() : nullptr;
          T* dx = rows ? dlogits.data<T>() : nullptr;
          if (rows > 0)
            dispatch<IdTypes>(targets.dtype(), op, [&](auto id_tag) {
              const auto* t = targets.data<typename decltype(id_tag)::type>();
              parallel_for(rows * cols, cols, [&](std::int64_t lo, std::int64_t hi) {
                for (std::int64_t r = lo / cols; r < hi / cols; ++r) {
                  const T* xr = x + r * cols;
                  T* dxr = dx + r * cols;
                  const std::int64_t target = static_cast<std::int64_t>(t[r]);
                  const A lse_r = row_lse(xr, vocab);
                  plosses[r] = target < 0 ? A(0) : lse_r - load<A>(xr[target]);
                  for (std::int64_t i = 0; i < cols; ++i) {
                    const bool zero = target < 0 || i >= vocab;  // ignored row, padded column
                    dxr[i] = zero ? store<T>(A(0))
                                  : store<T>(cross_entropy_dlogit(load<A>(xr[i]), lse_r,
                                                                  i == target, A(scale)));
                  }
                }
              });
            });
          mean_of_losses(plosses, rows, normaliser, loss.data<A>());
        });
      },
      logits, targets, losses, loss, dlogits);
}

}  // namespace zrt::kernels
