#include "zrt/kernels/ops/grad_accumulate.h"

#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/dispatch.h"
#include "zrt/kernels/kernel_path.h"
#include "zrt/kernels/launch.h"
#include "zrt/kernels/ops/grad_accumulate_math.h"
#include "zrt/kernels/ops/op_checks.h"
#ifdef ZRT_WITH_CUDA
#include "zrt/kernels/ops/grad_accumulate.cuh"
#endif

namespace zrt::kernels {

void accumulate_grad(const Tensor& acc, const Tensor& grad, float scale, Stream stream) {
  const Device device = check_operands("accumulate_grad", {acc, grad}, stream);
  check_same_numel("accumulate_grad", acc, grad);
  check_apart("accumulate_grad", acc, "grad", grad, /*in_place=*/true);
  check_dtype("accumulate_grad", acc, DType::f32);
  check_kernel_float("accumulate_grad", grad);
  const std::int64_t n = acc.numel();
  if (n == 0) return;
  float* a = static_cast<float*>(acc.data_ptr());
  ZRT_CUDA_LAUNCH_AND_RETURN(
      "accumulate_grad", device,
      cuda::launch_accumulate_grad(a, grad.data_ptr(), grad.dtype(), n, scale,
                                   simple_kernel(FastKernel::elementwise), cuda_stream(stream)));
  run_cpu_twin_over(stream, "accumulate_grad", {acc},
                    [a, gp = grad.data_ptr(), gt = grad.dtype(), n, scale] {
                      dispatch<StorageFloats>(gt, "accumulate_grad", [&](auto tag) {
                        using G = typename decltype(tag)::type;
                        const G* g = static_cast<const G*>(gp);
                        parallel_for(n, 256, [&](std::int64_t b, std::int64_t e) {
                          for (std::int64_t i = b; i < e; ++i)
                            a[i] = accumulate_element(a[i], g[i], scale);
                        });
                      });
                    });
}

}  // namespace zrt::kernels
