#include "zrt/kernels/nn/activation.h"

#include <type_traits>

#include "zrt/kernels/cpu_isa/isa_kernels.h"
#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/kernel_path.h"
#include "zrt/kernels/launch.h"
#include "zrt/kernels/nn/nn_checks.h"

#ifdef ZRT_WITH_CUDA
#include "zrt/kernels/nn/activation.cuh"
#endif

namespace zrt::kernels {

void activation_forward(Activation act, const Tensor& x, const Tensor& y, Stream stream) {
  constexpr const char* op = "activation_forward";
  check_nn_floats(op, {x, y});
  check_numel(op, y, x.numel());
  if (x.numel() == 0) return;
  check_apart(op, y, "input", x, /*in_place=*/true);
  check_operands(op, {x, y}, stream);
  ZRT_CUDA_LAUNCH_AND_RETURN(
      op, x.device(),
      cuda::launch_activation_forward(act, x.dtype(), x.numel(), x.data_ptr(), y.data_ptr(),
                                      simple_kernel(FastKernel::elementwise), cuda_stream(stream)));
  run_cpu_twin(
      stream, op,
      [=](const Tensor& x, const Tensor& y) {
        dispatch<NnFloats>(x.dtype(), op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using A = acc_t<T>;
          const T* px = x.data<T>();
          T* py = y.data<T>();
          parallel_for(x.numel(), 64, [&](std::int64_t b, std::int64_t e) {
            if constexpr (std::is_same_v<T, A>) {
              if (act == Activation::gelu)
                return isa_kernels().table<A>().gelu_forward(px + b, py + b, e - b);
            }
            for (std::int64_t i = b; i < e; ++i)
              py[i] = store<T>(activation_forward(act, load<A>(px[i])));
          });
        });
      },
      x, y);
}

void activation_backward(Activation act, const Tensor& x, const Tensor& dy, const Tensor& dx,
                         Stream stream) {
  constexpr const char* op = "activation_backward";
  check_nn_floats(op, {x, dy, dx});
  check_numel(op, dy, x.numel());
  check_numel(op, dx, x.numel());
  check_apart(op, dx, "dy", dy, /*in_place=*/true);
  check_apart(op, dx, "x", x);
  if (x.numel() == 0) return;
  check_operands(op, {x, dy, dx}, stream);
  ZRT_CUDA_LAUNCH_AND_RETURN(
      op, x.device(),
      cuda::launch_activation_backward(act, x.dtype(), x.numel(), x.data_ptr(), dy.data_ptr(),
                                       dx.data_ptr(), simple_kernel(FastKernel::elementwise),
                                       cuda_stream(stream)));
  run_cpu_twin(
      stream, op,
      [=](const Tensor& x, const Tensor& dy, const Tensor& dx) {
        dispatch<NnFloats>(x.dtype(), op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using A = acc_t<T>;
          const T* px = x.data<T>();
          const T* pdy = dy.data<T>();
          T* pdx = dx.data<T>();
          parallel_for(x.numel(), 64, [&](std::int64_t b, std::int64_t e) {
            if constexpr (std::is_same_v<T, A>) {
              if (act == Activation::gelu)
                return isa_kernels().table<A>().gelu_backward(px + b, pdy + b, pdx + b, e - b);
            }
            for (std::int64_t i = b; i < e; ++i)
              pdx[i] = store<T>(activation_backward(act, load<A>(px[i]), load<A>(pdy[i])));
          });
        });
      },
      x, dy, dx);
}

}  // namespace zrt::kernels
