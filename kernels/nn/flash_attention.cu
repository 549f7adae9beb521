// The CUDA side of Note [Flash attention on tensor cores]: the Warp policy
// of flash_attention_math.h on one lane (mma.sync, ldmatrix, quad
// shuffles), the kernels and their launchers.
#include <cstdint>
#include <type_traits>

#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/nn/attention.cuh"
#include "zrt/kernels/nn/flash_attention_math.h"
#include "zrt/kernels/nn/smem_launch.cuh"
#include "zrt/runtime/device.h"

namespace zrt::kernels::cuda {
namespace {

// The tensor-core instructions below need sm_80 (bf16 mma.sync m16n8k16).
// Built for an older architecture too (CMAKE_CUDA_ARCHITECTURES may list
// several), the kernels then trap; the path chooser never takes flash on
// such a device (Note [Attention paths]), and the launchers check it again
// (require_flash_device).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define ZRT_FLASH_TENSOR_CORES 1
#else
#define ZRT_FLASH_TENSOR_CORES 0
#endif

// c += a · b for one m16n8k16 tile, this lane's fragments.
template <class T>
__device__ void flash_mma(const std::uint32_t* a, const std::uint32_t* b, float* c) {
#if !ZRT_FLASH_TENSOR_CORES
  (void)a, (void)b, (void)c;
  __trap();
#else
  if constexpr (std::is_same_v<T, bf16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    static_assert(std::is_same_v<T, f16>, "flash attention runs bf16 and f16");
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#endif
}

// A warp as the math's Warp policy: this lane alone; what crosses lanes is
// mma.sync and shuffles within the quad (lanes 4g..4g+3 share a row).
struct FlashDeviceWarp {
  static constexpr int kLanes = 1;
  int lane_id;
  ZRT_HD int lane(int) const { return lane_id; }
  template <class T, class AOf, class BOf, class COf>
  ZRT_HD void mma(const AOf& a_of, const BOf& b_of, const COf& c_of) const {
#if defined(__CUDA_ARCH__)
    flash_mma<T>(a_of(0), b_of(0), c_of(0));
#else
    (void)a_of, (void)b_of, (void)c_of;
#endif
  }
  // ldmatrix.m8n8.x4 (.trans when kTrans) from this lane's row address. The
  // memory clobber keeps it after the barrier that publishes the tile.
  template <bool kTrans, class T, class RowOf, class RegsOf>
  ZRT_HD void ldmatrix_x4(const RowOf& row_of, const RegsOf& regs_of) const {
#if ZRT_FLASH_TENSOR_CORES
    const auto row = static_cast<std::uint32_t>(__cvta_generic_to_shared(row_of(0)));
    std::uint32_t* r = regs_of(0);
    if constexpr (kTrans)
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                   : "r"(row)
                   : "memory");
    else
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                   : "r"(row)
                   : "memory");
#else
    (void)row_of, (void)regs_of;
#endif
  }
  template <class Of>
  ZRT_HD void quad_max(const Of& v) const {
#if defined(__CUDA_ARCH__)
    float* x = v(0);
    for (int offset = 1; offset < 4; offset *= 2) {
      const float o = __shfl_xor_sync(0xffffffffu, *x, offset);
      *x = o > *x ? o : *x;
    }
#else
    (void)v;
#endif
  }
  template <class Of>
  ZRT_HD void quad_sum(const Of& v) const {
#if defined(__CUDA_ARCH__)
    float* x = v(0);
    for (int offset = 1; offset < 4; offset *= 2) *x += __shfl_xor_sync(0xffffffffu, *x, offset);
#else
    (void)v;
#endif
  }
};

// The block's warps as the math's Warps policy: this thread's lane state.
template <class Lane>
struct FlashDeviceWarps {
  Lane state[1];
  int warp, lane;
  template <class F>
  ZRT_HD void for_each_lane(const F& f) {
    f(warp, lane, state[0]);
  }
  template <class F>
  ZRT_HD void for_each_warp(const F& f) {
    f(FlashDeviceWarp{lane}, warp, state);
  }
};

// Threads striding over a tile's elements; sync is a block barrier.
struct FlashDeviceBlock {
  bool vec;  // tiles in 16-byte vectors (flash_vector_tiles)
  template <class F>
  ZRT_HD void for_each(int n, const F& f) const {
#if defined(__CUDA_ARCH__)
    for (int i = int(threadIdx.x); i < n; i += int(blockDim.x)) f(i);
#else
    (void)n, (void)f;
#endif
  }
  ZRT_HD void sync() const {
#if defined(__CUDA_ARCH__)
    __syncthreads();
#endif
  }
};

template <class Lane>
__device__ FlashDeviceWarps<Lane> flash_warps() {
  FlashDeviceWarps<Lane> w;
  w.warp = int(threadIdx.x) / 32;
  w.lane = int(threadIdx.x) % 32;
  return w;
}

// A block's (batch·head pair, tile). Blocks are numbered tile-major, so the
// heaviest tile of every pair is issued before any lighter one: numbered
// pair-major, the last pairs' heaviest tiles would start near the grid's end
// and run on alone (a list-scheduling estimate for GPT-2's 96 pairs of 16
// tiles: 35 tile-times of the forward instead of 27, against 25 ideal).
struct FlashBlock {
  std::int64_t pair, tile;
};
__device__ inline FlashBlock flash_block(std::int64_t pairs, std::int64_t tiles, bool last_first) {
  const std::int64_t block = blockIdx.x, t = block / pairs;
  return {block % pairs, last_first ? tiles - 1 - t : t};
}

template <class T, int HD>
__global__ void __launch_bounds__(kFlashThreads)
    flash_forward_kernel(AttentionDims d, std::int64_t tiles, bool vec, const T* qkv, T* out,
                         float* lse) {
  extern __shared__ __align__(16) unsigned char flash_smem[];
  auto warps = flash_warps<FlashForwardLane<HD>>();
  const FlashBlock b = flash_block(d.batch * d.heads, tiles, true);
  flash_forward_block<T, HD>(FlashDeviceBlock{vec}, warps, d, b.pair, b.tile, qkv, out, lse,
                             reinterpret_cast<T*>(flash_smem));
}

// A backward block per (pair, key tile) for dK and dV (kKeys) or per (pair,
// query tile) for dQ: the first key tiles see every query tile.
template <class T, int HD, bool kKeys>
__global__ void __launch_bounds__(kFlashThreads)
    flash_backward_kernel(FlashBackwardArgs<T> a, std::int64_t tiles, bool vec) {
  extern __shared__ __align__(16) unsigned char flash_smem[];
  const FlashBlock b = flash_block(a.d.batch * a.d.heads, tiles, !kKeys);
  T* smem = reinterpret_cast<T*>(flash_smem);
  if constexpr (kKeys) {
    auto warps = flash_warps<FlashKeyLane<HD>>();
    flash_backward_kv_block<T, HD>(FlashDeviceBlock{vec}, warps, a, b.pair, b.tile, smem);
  } else {
    auto warps = flash_warps<FlashQueryLane<HD>>();
    flash_backward_q_block<T, HD>(FlashDeviceBlock{vec}, warps, a, b.pair, b.tile, smem);
  }
}

// D of one row (attention_row_dsum), its head's hd elements of dout and
// out read in 16-byte packs when both are aligned (rows and head slices
// start on multiples of 8 elements) instead of 2 · hd scalar loads, the
// products summed in the same order.
template <class T>
struct FlashRowSumBody {
  FlashBackwardArgs<T> a;
  bool vec;
  __device__ void operator()(std::int64_t r) const {
    if (!vec) {
      a.dsum[r] = attention_row_dsum<T, float>(a.d, r, a.dout, a.out);
      return;
    }
    constexpr int L = Pack<T>::kLen;
    const AttentionRow row(a.d, r);
    const std::int64_t off = row.o_off(row.t);
    float s = 0;
    for (std::int64_t p = 0; p < a.d.head_dim / L; ++p) {
      const Pack<T> x = pack_at<L>(a.dout + off, p), y = pack_at<L>(a.out + off, p);
#pragma unroll
      for (int j = 0; j < L; ++j) s += load<float>(x.v[j]) * load<float>(y.v[j]);
    }
    a.dsum[r] = s;
  }
};

// f(T, HD tag) for the call's dtype and head dim.
template <class F>
void flash_dispatch(DType dtype, std::int64_t hd, const char* op, const F& f) {
  auto with_hd = [&](auto tag) {
    using T = typename decltype(tag)::type;
    switch (hd) {
      case 16:
        return f(T{}, std::integral_constant<int, 16>{});
      case 32:
        return f(T{}, std::integral_constant<int, 32>{});
      case 64:
        return f(T{}, std::integral_constant<int, 64>{});
      case 128:
        return f(T{}, std::integral_constant<int, 128>{});
      default:
        break;
    }
    ZRT_THROW(InvalidArgument, op, ": flash attention has no kernel for head dim ", hd);
  };
  if (dtype == DType::bf16) return with_hd(std::type_identity<bf16>{});
  if (dtype == DType::f16) return with_hd(std::type_identity<f16>{});
  ZRT_THROW(InvalidArgument, op, ": flash attention runs bf16 and f16, not ", dtype_name(dtype));
}

std::int64_t flash_tiles(std::int64_t seq) { return (seq + kFlashRows - 1) / kFlashRows; }

// The kernels' mma.sync m16n8k16 needs compute capability 8.0 or newer.
void require_flash_device(const char* op) {
  int device = 0;
  ZRT_CUDA_CHECK(cudaGetDevice(&device));
  const int capability = cuda_compute_capability(Device::cuda(device));
  ZRT_CHECK_ARG(capability >= 80, op, ": the flash attention path needs a GPU of compute ",
                "capability 8.0 or newer (its tensor-core products); cuda:", device,
                capability == 0 ? std::string(" did not say its own")
                                : detail::concat(" is ", capability / 10, ".", capability % 10),
                ": set ZRT_ATTENTION_PATH to gemm or tiled, or leave it unset");
}

}  // namespace

void launch_flash_attention_forward(DType dtype, const AttentionDims& dims, const void* qkv,
                                    void* out, void* lse, cudaStream_t stream) {
  require_flash_device("attention_forward");
  flash_dispatch(dtype, dims.head_dim, "attention_forward", [&](auto t, auto hd) {
    using T = decltype(t);
    constexpr int HD = decltype(hd)::value;
    const std::int64_t tiles = flash_tiles(dims.seq);
    launch_with_smem(flash_forward_kernel<T, HD>, dims.batch * dims.heads * tiles, kFlashThreads,
                     flash_forward_smem(HD) * std::int64_t(sizeof(T)), stream, dims, tiles,
                     flash_vector_tiles(qkv, qkv), static_cast<const T*>(qkv), static_cast<T*>(out),
                     static_cast<float*>(lse));
  });
}

void launch_flash_attention_backward(DType dtype, const AttentionDims& dims, const void* dout,
                                     const void* qkv, const void* out, const void* lse, void* dsum,
                                     void* dqkv, cudaStream_t stream) {
  require_flash_device("attention_backward");
  flash_dispatch(dtype, dims.head_dim, "attention_backward", [&](auto t, auto hd) {
    using T = decltype(t);
    constexpr int HD = decltype(hd)::value;
    const std::int64_t tiles = flash_tiles(dims.seq), pairs = dims.batch * dims.heads;
    const FlashBackwardArgs<T> a(dims, dout, qkv, out, lse, dsum, dqkv);
    for_each_index(pairs * dims.seq, FlashRowSumBody<T>{a, pack_aligned(dout, out)}, stream);
    const std::int64_t bytes = flash_backward_smem(HD) * std::int64_t(sizeof(T));
    const bool vec = flash_vector_tiles(qkv, dout);
    launch_with_smem(flash_backward_kernel<T, HD, true>, pairs * tiles, kFlashThreads, bytes,
                     stream, a, tiles, vec);
    launch_with_smem(flash_backward_kernel<T, HD, false>, pairs * tiles, kFlashThreads, bytes,
                     stream, a, tiles, vec);
  });
}

}  // namespace zrt::kernels::cuda
