#include "zrt/kernels/dispatch.h"
#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/ops/norm.cuh"
#include "zrt/kernels/ops/norm_math.h"

namespace zrt::kernels::cuda {
namespace {

// Note [Norm lanes in registers]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The kernels keep Note [Deterministic norm]'s order exactly but not its
// one-thread-per-lane picture, which cost a block 18 barriers for 16 KiB of
// reads and left each thread one load in flight. Here a thread owns L =
// 16 / sizeof(T) neighbouring lanes (4 for f32, 8 for bf16 and f16), so one
// 16-byte load fetches its L lanes' elements of a row; its 16 rows are
// loaded into registers ahead of their adds, then each lane's rows are
// summed in order (the compiler keeps all 16 loads in flight for 16-bit
// types, a few for f32, where eight blocks an SM keep enough in flight).
// A norm block is G = 256 / L threads (64 or 32) and a CUDA block holds
// 256 / G of them. The
// halving tree's level s (lane j += lane j + s, j < s) pairs a thread with
// the one s / L further on, in the same slot: a warp shuffle (v +
// __shfl_down_sync(v, d) is that addition for the threads below d; those
// above compute values no later level reads), or shared memory for the one
// level whose partner sits in the other warp of a 64-thread norm block.
// Levels s < L are inside a thread: slot i += slot i + s. The squares' and
// the x - x trees run side by side, one barrier for both.
template <class T>
inline constexpr int kLanesPerThread = 16 / int(sizeof(T));
template <class T>
inline constexpr int kThreadsPerNorm = kNormLanes / kLanesPerThread<T>;
template <class T>
inline constexpr int kNormsPerCta = kThreadsPerBlock / kThreadsPerNorm<T>;

constexpr unsigned kFullMask = 0xffffffffu;

// Lane sums of thread t of a norm block (lanes t·L .. t·L + L - 1).
template <class T, bool kVector>
__device__ void norm_thread_lanes(const T* x, std::int64_t begin, std::int64_t n, int t, float* sq,
                                  float* nf) {
  constexpr int L = kLanesPerThread<T>;
  if (kVector && begin + kNormBlock <= n) {
    Pack<T, L> rows[kNormPerLane];  // every load issued before the first add
#pragma unroll
    for (int k = 0; k < kNormPerLane; ++k)
      rows[k] = pack_at<L>(x + begin + std::int64_t(k) * kNormLanes, t);
#pragma unroll
    for (int k = 0; k < kNormPerLane; ++k)
#pragma unroll
      for (int i = 0; i < L; ++i) {
        const float v = to_f32(rows[k].v[i]);
        sq[i] = sq[i] + v * v;
        nf[i] = nf[i] + (v - v);
      }
  } else if (begin < n) {  // unaligned, or the last partial block
#pragma unroll
    for (int i = 0; i < L; ++i) norm_lane(x, begin, n, t * L + i, sq[i], nf[i]);
  }
}

// One norm block per G threads: writes its sum of squares and of x - x.
template <class T, bool kVector>
__global__ void norm_blocks_kernel(const T* x, std::int64_t n, std::int64_t blocks,
                                   float* partials) {
  constexpr int L = kLanesPerThread<T>;
  constexpr int G = kThreadsPerNorm<T>;
  static_assert(G == kWarpSize || G == 2 * kWarpSize, "a norm block is one or two warps");
  const int t = int(threadIdx.x) % G;
  const std::int64_t block = std::int64_t(blockIdx.x) * kNormsPerCta<T> + threadIdx.x / G;
  float sq[L] = {}, nf[L] = {};
  norm_thread_lanes<T, kVector>(x, block * kNormBlock, n, t, sq, nf);
  if constexpr (G == 2 * kWarpSize) {  // level s = 128: the partner is in the other warp
    __shared__ float upper[kThreadsPerBlock / 2][2 * L];
    const int pair = int(threadIdx.x) / G * kWarpSize + t % kWarpSize;
    if (t >= kWarpSize)
#pragma unroll
      for (int i = 0; i < L; ++i) {
        upper[pair][i] = sq[i];
        upper[pair][L + i] = nf[i];
      }
    __syncthreads();
    if (t < kWarpSize)
#pragma unroll
      for (int i = 0; i < L; ++i) {
        sq[i] = sq[i] + upper[pair][i];
        nf[i] = nf[i] + upper[pair][L + i];
      }
  }
#pragma unroll
  for (int d = kWarpSize / 2; d >= 1; d /= 2)  // levels s = d·L, down to s = L
#pragma unroll
    for (int i = 0; i < L; ++i) {
      sq[i] = sq[i] + __shfl_down_sync(kFullMask, sq[i], d);
      nf[i] = nf[i] + __shfl_down_sync(kFullMask, nf[i], d);
    }
#pragma unroll
  for (int s = L / 2; s >= 1; s /= 2)  // levels inside the thread
#pragma unroll
    for (int i = 0; i < s; ++i) {
      sq[i] = sq[i] + sq[i + s];
      nf[i] = nf[i] + nf[i + s];
    }
  if (t == 0 && block < blocks) {
    partials[2 * block] = sq[0];
    partials[2 * block + 1] = nf[0];
  }
}

// One block: lane j sums block results j, j + 256, ... in f64 (32 loads in
// flight before their adds: a 2^31-element shard has half a million block
// results, and one block walks them latency-bound), then the halving tree:
// shared memory down to one warp, shuffles for s = 16 .. 1.
__global__ void norm_final_kernel(const float* partials, std::int64_t blocks, double* result,
                                  bool flag_non_finite) {
  static_assert(kNormLanes == kThreadsPerBlock);
  __shared__ double sq[kNormLanes];
  __shared__ double nf[kNormLanes];
  const float2* pairs = reinterpret_cast<const float2*>(partials);
  constexpr int kBatch = 32;
  double s = 0.0, f = 0.0;
  // Past the last result a lane adds +0.0, which leaves its sums' bits as
  // they are (they start at +0.0 and add squares and counts).
  for (std::int64_t b = threadIdx.x; b < blocks; b += kBatch * kNormLanes) {
    float2 v[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k)
      v[k] = b + k * kNormLanes < blocks ? pairs[b + k * kNormLanes] : float2{0.0f, 0.0f};
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      s = s + double(v[k].x);
      f = f + double(v[k].y);
    }
  }
  sq[threadIdx.x] = s;
  nf[threadIdx.x] = f;
  for (int h = kNormLanes / 2; h >= kWarpSize; h /= 2) {
    __syncthreads();
    if (int(threadIdx.x) < h) {
      sq[threadIdx.x] = sq[threadIdx.x] + sq[threadIdx.x + h];
      nf[threadIdx.x] = nf[threadIdx.x] + nf[threadIdx.x + h];
    }
  }
  __syncthreads();
  if (threadIdx.x >= kWarpSize) return;
  s = sq[threadIdx.x];
  f = nf[threadIdx.x];
#pragma unroll
  for (int d = kWarpSize / 2; d >= 1; d /= 2) {
    s = s + __shfl_down_sync(kFullMask, s, d);
    f = f + __shfl_down_sync(kFullMask, f, d);
  }
  if (threadIdx.x == 0) {
    result[0] = s;
    result[1] = flag_non_finite ? (isnan(f) ? 1.0 : 0.0) : f;
  }
}

}  // namespace

void launch_squared_norm(const void* x, DType dtype, std::int64_t n, float* block_partials,
                         double* result_device, bool flag_non_finite, cudaStream_t stream) {
  const std::int64_t blocks = norm_blocks(n);
  dispatch<StorageFloats>(dtype, "squared_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (blocks == 0) return;
    const auto* xt = static_cast<const T*>(x);
    const auto ctas = unsigned((blocks + kNormsPerCta<T> - 1) / kNormsPerCta<T>);
    float* out = block_partials;
    if (pack_aligned(xt))
      norm_blocks_kernel<T, true><<<ctas, kThreadsPerBlock, 0, stream>>>(xt, n, blocks, out);
    else
      norm_blocks_kernel<T, false><<<ctas, kThreadsPerBlock, 0, stream>>>(xt, n, blocks, out);
    ZRT_CUDA_CHECK_LAUNCH();
  });
  norm_final_kernel<<<1, kNormLanes, 0, stream>>>(block_partials, blocks, result_device,
                                                  flag_non_finite);
  ZRT_CUDA_CHECK_LAUNCH();
}

}  // namespace zrt::kernels::cuda
