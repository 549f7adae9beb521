#include "zrt/kernels/ops/norm.h"

#include <array>
#include <cmath>
#include <vector>

#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/dispatch.h"
#include "zrt/kernels/launch.h"
#include "zrt/kernels/ops/cpu_clones.h"
#include "zrt/kernels/ops/norm_math.h"
#include "zrt/kernels/ops/op_checks.h"
#ifdef ZRT_WITH_CUDA
#include "zrt/kernels/ops/norm.cuh"
#endif

namespace zrt::kernels {
namespace {

// The halving tree of Note [Deterministic norm].
template <class A>
A tree_reduce(std::array<A, kNormLanes>& lanes) {
  for (int s = kNormLanes / 2; s > 0; s /= 2)
    for (int j = 0; j < s; ++j) lanes[j] = lanes[j] + lanes[j + s];
  return lanes[0];
}

// CPU twin of one norm block; the lane loop is innermost so it vectorises.
template <class T>
ZRT_CPU_CLONES void norm_block_cpu(const T* x, std::int64_t block, std::int64_t n, float& sum_sq,
                                   float& non_finite) {
  std::array<float, kNormLanes> sq{}, nf{};
  const std::int64_t begin = block * kNormBlock;
  if (begin + kNormBlock <= n) {
    for (int k = 0; k < kNormPerLane; ++k) {
      const T* row = x + begin + std::int64_t(k) * kNormLanes;
      for (int j = 0; j < kNormLanes; ++j) {
        const float v = to_f32(row[j]);
        sq[j] = sq[j] + v * v;
        nf[j] = nf[j] + (v - v);
      }
    }
  } else {  // the last, partial block: the shared per-lane code with bounds checks
    for (int j = 0; j < kNormLanes; ++j) norm_lane(x, begin, n, j, sq[j], nf[j]);
  }
  sum_sq = tree_reduce(sq);
  non_finite = tree_reduce(nf);
}

template <class T>
NormResult squared_norm_cpu(const T* x, std::int64_t n) {
  const std::int64_t blocks = norm_blocks(n);
  std::vector<float> partials(static_cast<std::size_t>(2 * blocks));
  // parallel_for counts in elements; one task per norm block.
  parallel_for(blocks * kNormBlock, kNormBlock, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t blk = b / kNormBlock; blk < e / kNormBlock; ++blk)
      norm_block_cpu(x, blk, n, partials[2 * blk], partials[2 * blk + 1]);
  });
  std::array<double, kNormLanes> sq{}, nf{};
  for (int j = 0; j < kNormLanes; ++j)
    for (std::int64_t blk = j; blk < blocks; blk += kNormLanes) {
      sq[j] = sq[j] + double(partials[2 * blk]);
      nf[j] = nf[j] + double(partials[2 * blk + 1]);
    }
  const double sum = tree_reduce(sq);
  return {sum, std::isnan(tree_reduce(nf))};
}

// squared_norm, its errors naming `op` (has_non_finite is one too).
NormResult squared_norm_as(const char* op, const Tensor& x, Stream stream) {
  const Device device = check_operands(op, {x}, stream);
  check_kernel_float(op, x);
  const std::int64_t n = x.numel();
  if (n == 0) return {};  // an empty tensor may have no storage to allocate beside
  ZRT_CUDA_LAUNCH_AND_RETURN(op, device, [&] {
    // Device scratch for the block partials and the two f64 totals.
    // From x's own allocator (a caching one in training): no raw allocation per call.
    const AllocatorPtr& memory = x.storage().allocator();
    Tensor result = Tensor::empty({2}, DType::f64, device, memory, stream);
    squared_norm_into(x, result, stream);
    Tensor host = Tensor::empty({2}, DType::f64);
    host.copy_(result, stream);  // synchronised: the host is involved
    return NormResult{host.item(0), host.item(1) != 0};
  }());
  return run_cpu_twin_and_wait(stream, op, [op, xp = x.data_ptr(), t = x.dtype(), n] {
    return dispatch<StorageFloats>(t, op, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return squared_norm_cpu(static_cast<const T*>(xp), n);
    });
  });
}

}  // namespace

NormResult squared_norm(const Tensor& x, Stream stream) {
  return squared_norm_as("squared_norm", x, stream);
}

void squared_norm_into(const Tensor& x, const Tensor& out, Stream stream) {
  const Device device = check_operands("squared_norm_into", {x, out}, stream);
  check_kernel_float("squared_norm_into", x);
  ZRT_CHECK_ARG(out.dtype() == DType::f64 && out.numel() == 2, "squared_norm_into: out ", out.str(),
                " must be f64 with 2 elements");
  const std::int64_t n = x.numel();
  if (device.is_cuda()) {
#ifdef ZRT_WITH_CUDA
    CudaDeviceGuard guard(device.index);
    // From x's own allocator (a caching one in training): no raw allocation per call.
    Tensor partials = Tensor::empty({2 * norm_blocks(n) + 1}, DType::f32, device,
                                    x.storage().allocator(), stream);
    cuda::launch_squared_norm(x.data_ptr(), x.dtype(), n, static_cast<float*>(partials.data_ptr()),
                              static_cast<double*>(out.data_ptr()), true, cuda_stream(stream));
    return;
#else
    throw_no_cuda("squared_norm_into");
#endif
  }
  run_cpu_twin(
      stream, "squared_norm_into",
      [n](const Tensor& xv, const Tensor& outv) {
        const NormResult r = dispatch<StorageFloats>(xv.dtype(), "squared_norm", [&](auto tag) {
          using T = typename decltype(tag)::type;
          return squared_norm_cpu(static_cast<const T*>(xv.data_ptr()), n);
        });
        outv.data<double>()[0] = r.squared_norm;
        outv.data<double>()[1] = r.non_finite ? 1.0 : 0.0;
      },
      x, out);
}

bool has_non_finite(const Tensor& x, Stream stream) {
  return squared_norm_as("has_non_finite", x, stream).non_finite;
}

}  // namespace zrt::kernels
