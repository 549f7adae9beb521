#include "zrt/kernels/ops/scale.h"

#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/dispatch.h"
#include "zrt/kernels/kernel_path.h"
#include "zrt/kernels/launch.h"
#include "zrt/kernels/ops/op_checks.h"
#include "zrt/kernels/ops/scale_math.h"
#ifdef ZRT_WITH_CUDA
#include "zrt/kernels/ops/scale.cuh"
#endif

namespace zrt::kernels {

void scale_(const Tensor& x, double factor, Stream stream) {
  const Device device = check_operands("scale_", {x}, stream);
  check_kernel_float("scale_", x);
  const std::int64_t n = x.numel();
  const float f = static_cast<float>(factor);
  if (n == 0) return;
  ZRT_CUDA_LAUNCH_AND_RETURN(
      "scale_", device,
      cuda::launch_scale(x.data_ptr(), x.dtype(), n, f, simple_kernel(FastKernel::elementwise),
                         cuda_stream(stream)));
  run_cpu_twin_over(stream, "scale_", {x}, [xp = x.data_ptr(), t = x.dtype(), n, f] {
    dispatch<StorageFloats>(t, "scale_", [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* p = static_cast<T*>(xp);
      parallel_for(n, 256, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) p[i] = scale_element(p[i], f);
      });
    });
  });
}

}  // namespace zrt::kernels
