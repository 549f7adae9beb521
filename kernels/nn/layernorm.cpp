#include "zrt/kernels/nn/layernorm.h"

#include <vector>

#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/kernel_path.h"
#include "zrt/kernels/launch.h"
#include "zrt/kernels/nn/cpu_reduce.h"
#include "zrt/kernels/nn/layernorm_math.h"
#include "zrt/kernels/nn/nn_checks.h"
#include "zrt/kernels/ops/fill.h"

#ifdef ZRT_WITH_CUDA
#include "zrt/kernels/nn/layernorm.cuh"
#endif

namespace zrt::kernels {
namespace {

template <class T, class A>
void layernorm_forward_cpu(std::int64_t rows, std::int64_t c, const T* x, const T* w, const T* b,
                           T* y, A* mean, A* rstd, A eps) {
  parallel_for(rows * c, c, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo / c; r < hi / c; ++r) {
      const T* xr = x + r * c;
      const A mu = lane_sum<A>(c, [&](std::int64_t i) { return load<A>(xr[i]); }) / A(c);
      const A sq = lane_sum<A>(c, [&](std::int64_t i) {
        const A d = load<A>(xr[i]) - mu;
        return d * d;
      });
      const A rs = layernorm_rstd(sq, c, eps);
      for (std::int64_t i = 0; i < c; ++i)
        y[r * c + i] =
            store<T>(layernorm_out(load<A>(xr[i]), mu, rs, load<A>(w[i]), load<A>(b[i])));
      mean[r] = mu;
      rstd[r] = rs;
    }
  });
}

template <class T, class A>
void layernorm_backward_cpu(std::int64_t rows, std::int64_t c, const T* dy, const T* x, const T* w,
                            const A* mean, const A* rstd, T* dx, T* dw, T* db, bool accumulate) {
  // Parameter gradients first (dx may overwrite dy): features split over
  // threads, each feature's rows summed in order (row-major sweeps over the
  // thread's features), so the result does not depend on threads.
  parallel_for(c * rows, rows, [&](std::int64_t lo, std::int64_t hi) {
    const std::int64_t i0 = lo / rows, i1 = hi / rows;
    std::vector<A> gw(static_cast<std::size_t>(i1 - i0)), gb(gw.size());
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* dyr = dy + r * c;
      const T* xr = x + r * c;
      const A mu = mean[r], rs = rstd[r];
      for (std::int64_t i = i0; i < i1; ++i)
        layernorm_param_grad_add(gw[i - i0], gb[i - i0], load<A>(dyr[i]), load<A>(xr[i]), mu, rs);
    }
    for (std::int64_t i = i0; i < i1; ++i) {
      dw[i] = store<T>((accumulate ? load<A>(dw[i]) : A(0)) + gw[i - i0]);
      db[i] = store<T>((accumulate ? load<A>(db[i]) : A(0)) + gb[i - i0]);
    }
  });
  parallel_for(rows * c, c, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo / c; r < hi / c; ++r) {
      const T* xr = x + r * c;
      const T* dyr = dy + r * c;
      const A mu = mean[r], rs = rstd[r];
      const A mean_g =
          lane_sum<A>(c, [&](std::int64_t i) { return load<A>(dyr[i]) * load<A>(w[i]); }) / A(c);
      const A mean_gx =
          lane_sum<A>(c,
                      [&](std::int64_t i) {
                        return load<A>(dyr[i]) * load<A>(w[i]) * (load<A>(xr[i]) - mu) * rs;
                      }) /
          A(c);
      for (std::int64_t i = 0; i < c; ++i) {
        const A g = load<A>(dyr[i]) * load<A>(w[i]);
        dx[r * c + i] = store<T>(layernorm_dx(g, (load<A>(xr[i]) - mu) * rs, mean_g, mean_gx, rs));
      }
    }
  });
}

// Checks shapes shared by forward and backward; returns {rows, C}.
std::pair<std::int64_t, std::int64_t> layernorm_dims(const char* op, const Tensor& x,
                                                     const Tensor& weight, const Tensor& mean,
                                                     const Tensor& rstd) {
  ZRT_CHECK_ARG(x.dim() >= 1, op, ": ", x.str(), " must have a feature dim");
  const std::int64_t c = x.size(-1), rows = matrix_rows(x);
  ZRT_CHECK_ARG(c > 0, op, ": ", x.str(), " has no features to normalise");
  check_numel(op, weight, c);
  check_numel(op, mean, rows);
  check_numel(op, rstd, rows);
  const DType acc = acc_dtype(x.dtype());
  check_dtype(op, mean, acc);
  check_dtype(op, rstd, acc);
  return {rows, c};
}

}  // namespace

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd, double eps, Stream stream) {
  constexpr const char* op = "layernorm_forward";
  check_nn_floats(op, {x, weight, bias, y});
  auto [rows, c] = layernorm_dims(op, x, weight, mean, rstd);
  check_numel(op, bias, c);
  check_numel(op, y, x.numel());
  ZRT_CHECK_ARG(eps > 0, op, ": eps must be positive, got ", eps);
  for (const Tensor* out : {&y, &mean, &rstd}) {
    check_apart(op, *out, "x", x);
    check_apart(op, *out, "weight", weight);
    check_apart(op, *out, "bias", bias);
  }
  check_disjoint(op, {{"y", y}, {"mean", mean}, {"rstd", rstd}});
  if (rows == 0) return;
  check_operands(op, {x, weight, bias, y, mean, rstd}, stream);
  ZRT_CUDA_LAUNCH_AND_RETURN(
      op, x.device(),
      cuda::launch_layernorm_forward(x.dtype(), rows, c, x.data_ptr(), weight.data_ptr(),
                                     bias.data_ptr(), y.data_ptr(), mean.data_ptr(),
                                     rstd.data_ptr(), eps, cuda_stream(stream)));
  run_cpu_twin(
      stream, op,
      [=](const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
          const Tensor& mean, const Tensor& rstd) {
        dispatch<NnFloats>(x.dtype(), op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using A = acc_t<T>;
          layernorm_forward_cpu<T, A>(rows, c, x.data<T>(), weight.data<T>(), bias.data<T>(),
                                      y.data<T>(), mean.data<A>(), rstd.data<A>(), A(eps));
        });
      },
      x, weight, bias, y, mean, rstd);
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                        const Tensor& dbias, bool accumulate_param_grads, Stream stream) {
  constexpr const char* op = "layernorm_backward";
  check_nn_floats(op, {x, dy, weight, dx, dweight, dbias});
  auto [rows, c] = layernorm_dims(op, x, weight, mean, rstd);
  check_numel(op, dy, x.numel());
  check_numel(op, dx, x.numel());
  check_numel(op, dweight, c);
  check_numel(op, dbias, c);
  check_apart(op, dx, "dy", dy, /*in_place=*/true);
  for (const Tensor* out : {&dx, &dweight, &dbias}) {
    if (out != &dx) check_apart(op, *out, "dy", dy);
    check_apart(op, *out, "x", x);
    check_apart(op, *out, "weight", weight);
    check_apart(op, *out, "mean", mean);
    check_apart(op, *out, "rstd", rstd);
  }
  check_disjoint(op, {{"dx", dx}, {"dweight", dweight}, {"dbias", dbias}});
  if (rows == 0) {
    if (!accumulate_param_grads) {
      zero(dweight, stream);
      zero(dbias, stream);
    }
    return;
  }
  check_operands(op, {dy, x, weight, mean, rstd, dx, dweight, dbias}, stream);
  ZRT_CUDA_LAUNCH_AND_RETURN(op, x.device(), [&] {
    // Scratch for the parameter gradients' tile partials (layernorm_math.h),
    // from x's allocator in the stream's order.
    const bool simple = simple_kernel(FastKernel::layernorm);
    const Tensor partials = simple
                                ? Tensor()
                                : Tensor::empty({2 * layernorm_param_tiles(rows) * c}, mean.dtype(),
                                                x.device(), x.storage().allocator(), stream);
    cuda::launch_layernorm_backward(x.dtype(), rows, c, dy.data_ptr(), x.data_ptr(),
                                    weight.data_ptr(), mean.data_ptr(), rstd.data_ptr(),
                                    dx.data_ptr(), dweight.data_ptr(), dbias.data_ptr(),
                                    accumulate_param_grads, simple ? nullptr : partials.data_ptr(),
                                    simple, cuda_stream(stream));
  }());
  run_cpu_twin(
      stream, op,
      [=](const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
          const Tensor& rstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
        dispatch<NnFloats>(x.dtype(), op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using A = acc_t<T>;
          layernorm_backward_cpu<T, A>(rows, c, dy.data<T>(), x.data<T>(), weight.data<T>(),
                                       mean.data<A>(), rstd.data<A>(), dx.data<T>(),
                                       dweight.data<T>(), dbias.data<T>(), accumulate_param_grads);
        });
      },
      dy, x, weight, mean, rstd, dx, dweight, dbias);
}

}  // namespace zrt::kernels
