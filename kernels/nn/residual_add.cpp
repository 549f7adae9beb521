#include "zrt/kernels/nn/residual_add.h"

#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/kernel_path.h"
#include "zrt/kernels/launch.h"
#include "zrt/kernels/nn/element.h"
#include "zrt/kernels/nn/nn_checks.h"

#ifdef ZRT_WITH_CUDA
#include "zrt/kernels/nn/residual_add.cuh"
#endif

namespace zrt::kernels {

void residual_add(const Tensor& a, const Tensor& b, const Tensor& out, Stream stream) {
  constexpr const char* op = "residual_add";
  check_nn_floats(op, {a, b, out});
  check_numel(op, b, a.numel());
  check_numel(op, out, a.numel());
  check_apart(op, out, "a", a, /*in_place=*/true);
  check_apart(op, out, "b", b, /*in_place=*/true);
  if (a.numel() == 0) return;
  check_operands(op, {a, b, out}, stream);
  ZRT_CUDA_LAUNCH_AND_RETURN(
      op, a.device(),
      cuda::launch_residual_add(a.dtype(), a.numel(), a.data_ptr(), b.data_ptr(), out.data_ptr(),
                                simple_kernel(FastKernel::elementwise), cuda_stream(stream)));
  run_cpu_twin(
      stream, op,
      [=](const Tensor& a, const Tensor& b, const Tensor& out) {
        dispatch<NnFloats>(a.dtype(), op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using A = acc_t<T>;
          const T* pa = a.data<T>();
          const T* pb = b.data<T>();
          T* po = out.data<T>();
          parallel_for(a.numel(), 64, [&](std::int64_t lo, std::int64_t hi) {
            for (std::int64_t i = lo; i < hi; ++i)
              po[i] = store<T>(load<A>(pa[i]) + load<A>(pb[i]));
          });
        });
      },
      a, b, out);
}

}  // namespace zrt::kernels
