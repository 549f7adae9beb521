#include "zrt/kernels/dispatch.h"
#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/ops/quantize.cuh"
#include "zrt/kernels/ops/quantize_math.h"

namespace zrt::kernels::cuda {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;

// Quantization blocks a CUDA block of kThreadsPerBlock threads holds.
template <int Bits>
constexpr std::int64_t kBlocksPerCuda = kThreadsPerBlock / kQuantBlockOf<Bits>;
static_assert(kBlocksPerCuda<8> == 1 && kBlocksPerCuda<4> * kInt4Block == kThreadsPerBlock &&
                  kInt4Block % kWarpSize == 0,
              "a CUDA block quantizes whole blocks of whole warps");

// A CUDA block per kBlocksPerCuda quantization blocks (grid-stride over
// them): thread t holds element t % B of block t / B (B elements a block),
// the block's max|x| is a warp-shuffle and shared-memory maximum over its
// warps (exact in any order), its first thread writes the scale. In int4
// the even thread t packs its value with thread t + 1's (a shuffle within
// the warp) into one byte.
template <int Bits, class S>
__global__ void quantize_kernel(std::uint8_t* dst, const S* src, std::int64_t chunks,
                                std::int64_t chunk) {
  constexpr int kBlock = static_cast<int>(kQuantBlockOf<Bits>), kWarps = kBlock / kWarpSize;
  __shared__ float warp_max[kWarpsPerBlock];
  const std::int64_t blocks = quant_blocks<Bits>(chunk), bytes = quantized_chunk_bytes<Bits>(chunk);
  const std::int64_t total = chunks * blocks;
  const int t = static_cast<int>(threadIdx.x), u = t % kBlock;
  for (std::int64_t g = blockIdx.x; g * kBlocksPerCuda<Bits> < total; g += gridDim.x) {
    const std::int64_t i = g * kBlocksPerCuda<Bits> + t / kBlock;  // this thread's block
    const bool live = i < total;
    const std::int64_t c = i / blocks, b = i % blocks;
    const std::int64_t j = b * kBlock + u;  // within the chunk
    const float x = live && j < chunk ? to_f32(src[c * chunk + j]) : 0.0f;
    float m = quant_magnitude(x);
    for (int d = kWarpSize / 2; d > 0; d /= 2) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, d));
    if (t % kWarpSize == 0) warp_max[t / kWarpSize] = m;
    __syncthreads();
    float amax = 0.0f;
    for (int w = t / kBlock * kWarps; w < (t / kBlock + 1) * kWarps; ++w)
      amax = fmaxf(amax, warp_max[w]);
    __syncthreads();  // warp_max is read before the next blocks write it
    const float scale = quant_scale<Bits>(amax);
    const int v = quantize_element<Bits>(x, scale);
    std::uint8_t* q = dst + c * bytes;
    if constexpr (Bits == 8) {
      if (live) q[4 * blocks + j] = quant_field<8>(v, 0);
    } else {
      const int next = __shfl_down_sync(kFullMask, v, 1);
      if (live && t % 2 == 0)
        q[4 * blocks + j / 2] =
            static_cast<std::uint8_t>(quant_field<4>(v, 0) | quant_field<4>(next, 1));
    }
    if (live && u == 0) store_scale(q + 4 * b, scale);
  }
}

template <int Bits, class D>
struct DequantizeBody {
  D* dst;
  const std::uint8_t* src;
  std::int64_t chunk, blocks, bytes;
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t c = i / chunk, j = i % chunk;
    dst[i] = from_f32<D>(dequantize_chunk_element<Bits>(src + c * bytes, blocks, j));
  }
};

template <int Bits>
struct DequantizeSumBody {
  float* dst;
  const std::uint8_t* src;
  std::int64_t chunks, n;
  float divisor;
  __device__ void operator()(std::int64_t j) const {
    dst[j] = dequantize_sum_element<Bits>(src, chunks, n, j, divisor);
  }
};

}  // namespace

void launch_dequantize_sum(float* dst, const std::uint8_t* src, std::int64_t chunks, std::int64_t n,
                           float divisor, int bits, cudaStream_t stream) {
  with_quant_bits(bits, [&](auto b) {
    constexpr int kBits = decltype(b)::value;
    for_each_index(n, DequantizeSumBody<kBits>{dst, src, chunks, n, divisor}, stream);
  });
}

void launch_quantize(std::uint8_t* dst, const void* src, DType src_dtype, std::int64_t chunks,
                     std::int64_t chunk, int bits, cudaStream_t stream) {
  with_quant_bits(bits, [&](auto b) {
    constexpr int kBits = decltype(b)::value;
    dispatch<StorageFloats>(src_dtype, "quantize", [&](auto tag) {
      using S = typename decltype(tag)::type;
      const std::int64_t groups =
          (chunks * quant_blocks<kBits>(chunk) + kBlocksPerCuda<kBits> - 1) / kBlocksPerCuda<kBits>;
      if (groups <= 0) return;
      const unsigned grid = static_cast<unsigned>(
          std::min<std::int64_t>(groups, std::int64_t(device_sm_count()) * 16));
      quantize_kernel<kBits, S>
          <<<grid, kThreadsPerBlock, 0, stream>>>(dst, static_cast<const S*>(src), chunks, chunk);
      ZRT_CUDA_CHECK_LAUNCH();
    });
  });
}

void launch_dequantize(void* dst, DType dst_dtype, const std::uint8_t* src, std::int64_t chunks,
                       std::int64_t chunk, int bits, cudaStream_t stream) {
  with_quant_bits(bits, [&](auto b) {
    constexpr int kBits = decltype(b)::value;
    dispatch<StorageFloats>(dst_dtype, "dequantize", [&](auto tag) {
      using D = typename decltype(tag)::type;
      const DequantizeBody<kBits, D> body{static_cast<D*>(dst), src, chunk,
                                          quant_blocks<kBits>(chunk),
                                          quantized_chunk_bytes<kBits>(chunk)};
      for_each_index(chunks * chunk, body, stream);
    });
  });
}

}  // namespace zrt::kernels::cuda
