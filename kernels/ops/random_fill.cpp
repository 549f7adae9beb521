#include "zrt/kernels/ops/random_fill.h"

#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/launch.h"
#include "zrt/kernels/ops/op_checks.h"
#ifdef ZRT_WITH_CUDA
#include "zrt/kernels/ops/random_fill.cuh"
#endif

namespace zrt::kernels {

void random_fill(const Tensor& dst, const RandomInit& dist, std::uint64_t seed,
                 std::uint64_t stream, std::int64_t first_index, Stream s) {
  constexpr const char* kOp = "random_fill";
  const Device device = check_operands(kOp, {dst}, s);
  check_dtype(kOp, dst, DType::f32);
  ZRT_CHECK_ARG(first_index >= 0, kOp, ": first_index must be >= 0 (got ", first_index, ")");
  const std::int64_t n = dst.numel();
  if (n == 0) return;
  float* p = static_cast<float*>(dst.data_ptr());
  ZRT_CUDA_LAUNCH_AND_RETURN(
      kOp, device, cuda::launch_random_fill(p, n, dist, seed, stream, first_index, cuda_stream(s)));
  run_cpu_twin_over(s, kOp, {dst}, [p, n, dist, seed, stream, first_index] {
    parallel_for(n, 4096, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i)
        p[i] = random_init_element(dist, seed, stream, static_cast<std::uint64_t>(first_index + i));
    });
  });
}

std::uint64_t random_stream_of(std::string_view name) {
  std::uint64_t h = 14695981039346656037ull;
  for (const char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

}  // namespace zrt::kernels
