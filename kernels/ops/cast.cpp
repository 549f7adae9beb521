#include "zrt/kernels/ops/cast.h"

#include <cstring>

#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/dispatch.h"
#include "zrt/kernels/kernel_path.h"
#include "zrt/kernels/launch.h"
#include "zrt/kernels/ops/cast_math.h"
#include "zrt/kernels/ops/cpu_clones.h"
#include "zrt/kernels/ops/op_checks.h"
#ifdef ZRT_WITH_CUDA
#include "zrt/kernels/ops/cast.cuh"
#endif

namespace zrt::kernels {
namespace {

constexpr std::int64_t kGrain = 256;

// One thread's chunk; a function of its own so it can be cloned per vector
// ISA (Note [CPU vector clones]) and see non-aliased pointers.
template <class D, class S>
ZRT_CPU_CLONES void cast_chunk(D* __restrict dst, const S* __restrict src, std::int64_t b,
                               std::int64_t e) {
  for (std::int64_t i = b; i < e; ++i) dst[i] = cast_element<D>(src[i]);
}

template <class D, class S>
void cast_cpu(D* dst, const S* src, std::int64_t n) {
  parallel_for(n, kGrain, [=](std::int64_t b, std::int64_t e) { cast_chunk(dst, src, b, e); });
}

ZRT_CPU_CLONES void cast_stochastic_chunk(std::uint16_t* __restrict dst,
                                          const float* __restrict src, std::uint64_t seed,
                                          std::int64_t b, std::int64_t e) {
  for (std::int64_t i = b; i < e; ++i)
    dst[i] = f32_to_bf16_stochastic(src[i], seed, static_cast<std::uint64_t>(i));
}

void cast_stochastic_cpu(std::uint16_t* dst, const float* src, std::int64_t n, std::uint64_t seed) {
  parallel_for(n, kGrain, [=](std::int64_t b, std::int64_t e) {
    cast_stochastic_chunk(dst, src, seed, b, e);
  });
}

// Same dtype: a byte copy, on the host or the device.
void copy_same_dtype(const Tensor& dst, const Tensor& src, [[maybe_unused]] Stream stream) {
  if (dst.data_ptr() == src.data_ptr()) return;
  ZRT_CUDA_LAUNCH_AND_RETURN(
      "cast", dst.device(),
      cuda::launch_copy(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cuda_stream(stream)));
  auto* d = static_cast<char*>(dst.data_ptr());
  const auto* s = static_cast<const char*>(src.data_ptr());
  const std::int64_t item = static_cast<std::int64_t>(dst.itemsize());
  run_cpu_twin_over(stream, "cast", {dst}, [d, s, item, n = dst.numel()] {
    parallel_for(n, kGrain, [&](std::int64_t b, std::int64_t e) {
      std::memcpy(d + b * item, s + b * item, static_cast<std::size_t>((e - b) * item));
    });
  });
}

}  // namespace

void cast(const Tensor& dst, const Tensor& src, Stream stream) {
  const Device device = check_operands("cast", {dst, src}, stream);
  check_same_numel("cast", dst, src);
  if (dst.dtype() == src.dtype()) return copy_same_dtype(dst, src, stream);
  if (dst.dtype() == DType::f64 && src.dtype() == DType::f32) {  // exact widening
    if (dst.numel() == 0) return;
    ZRT_CUDA_LAUNCH_AND_RETURN(
        "cast", device,
        cuda::launch_widen_f32_to_f64(static_cast<double*>(dst.data_ptr()),
                                      static_cast<const float*>(src.data_ptr()), dst.numel(),
                                      cuda_stream(stream)));
    run_cpu_twin_over(stream, "cast", {dst},
                      [d = static_cast<double*>(dst.data_ptr()),
                       s = static_cast<const float*>(src.data_ptr()), n = dst.numel()] {
                        for (std::int64_t i = 0; i < n; ++i) d[i] = s[i];
                      });
    return;
  }
  check_kernel_float("cast", dst);
  check_kernel_float("cast", src);
  if (dst.numel() == 0) return;
  ZRT_CUDA_LAUNCH_AND_RETURN(
      "cast", device,
      cuda::launch_cast(dst.data_ptr(), dst.dtype(), src.data_ptr(), src.dtype(), dst.numel(),
                        simple_kernel(FastKernel::elementwise), cuda_stream(stream)));
  run_cpu_twin_over(stream, "cast", {dst},
                    [d = dst.data_ptr(), dt = dst.dtype(), s = src.data_ptr(), st = src.dtype(),
                     n = dst.numel()] {
                      dispatch<StorageFloats>(dt, "cast", [&](auto dtag) {
                        using D = typename decltype(dtag)::type;
                        dispatch<StorageFloats>(st, "cast", [&](auto stag) {
                          using S = typename decltype(stag)::type;
                          cast_cpu(static_cast<D*>(d), static_cast<const S*>(s), n);
                        });
                      });
                    });
}

void cast_stochastic(const Tensor& dst, const Tensor& src, std::uint64_t seed, Stream stream) {
  const Device device = check_operands("cast_stochastic", {dst, src}, stream);
  check_same_numel("cast_stochastic", dst, src);
  check_dtype("cast_stochastic", dst, DType::bf16);
  check_dtype("cast_stochastic", src, DType::f32);
  if (dst.numel() == 0) return;
  auto* d = static_cast<std::uint16_t*>(dst.data_ptr());
  const auto* s = static_cast<const float*>(src.data_ptr());
  ZRT_CUDA_LAUNCH_AND_RETURN(
      "cast_stochastic", device,
      cuda::launch_cast_stochastic_bf16(
          d, s, dst.numel(), seed, simple_kernel(FastKernel::elementwise), cuda_stream(stream)));
  run_cpu_twin_over(stream, "cast_stochastic", {dst},
                    [d, s, n = dst.numel(), seed] { cast_stochastic_cpu(d, s, n, seed); });
}

}  // namespace zrt::kernels
