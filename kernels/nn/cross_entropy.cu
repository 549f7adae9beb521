#include <cmath>

#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/nn/block_sum_math.h"
#include "zrt/kernels/nn/cross_entropy.cuh"
#include "zrt/kernels/nn/cross_entropy_math.h"
#include "zrt/kernels/nn/id_check.cuh"
#include "zrt/kernels/nn/id_check.h"
#include "zrt/kernels/nn/warp_reduce.cuh"

namespace zrt::kernels::cuda {
namespace {

// A warp per row: max, then Σ exp(x - max), then the row's loss.
template <class T, class I>
struct CrossEntropyRow {
  using A = acc_t<T>;
  std::int64_t vocab;
  const T* logits;
  const I* targets;
  A* losses;
  A* lse;
  unsigned long long* flag;
  __device__ void operator()(std::int64_t row, int lane) const {
    const T* x = logits + row * vocab;
    A m = load<A>(x[0]);
    for (std::int64_t i = lane; i < vocab; i += kWarpSize) m = max(m, load<A>(x[i]));
    m = warp_max(m);
    A s = 0;
    for (std::int64_t i = lane; i < vocab; i += kWarpSize) s += exp_(load<A>(x[i]) - m);
    const A row_lse = m + log_(warp_sum(s));
    if (lane == 0) {
      const std::int64_t t = static_cast<std::int64_t>(targets[row]);
      // t >= vocab only with a flag (the host checked otherwise): ignored.
      if (t >= vocab && flag) record_bad_id(flag, row, t, unsigned(IdSource::target));
      lse[row] = row_lse;
      losses[row] = t < 0 || t >= vocab ? A(0) : row_lse - load<A>(x[t]);
    }
  }
};

// The simple mean: rows in order on one thread, bit-identical to the CPU
// twin's (Note [Fast kernels and their simple references]).
template <class A>
__global__ void cross_entropy_sum_kernel(std::int64_t rows, const A* losses, A normaliser,
                                         A* loss) {
  A s = 0;
  for (std::int64_t r = 0; r < rows; ++r) s += losses[r];
  *loss = s / normaliser;
}

// The fast mean, first pass: block b sums its chunk of rows into partial[b]
// (Note [Deterministic block sums]).
template <class A>
__global__ void __launch_bounds__(kBlockSumThreads)
    cross_entropy_partial_kernel(std::int64_t rows, std::int64_t chunk, const A* losses,
                                 A* partial) {
  const std::int64_t lo = min_i64(rows, std::int64_t(blockIdx.x) * chunk);
  const std::int64_t hi = min_i64(rows, lo + chunk);
  A s = 0;
  for (std::int64_t r = lo + threadIdx.x; r < hi; r += kBlockSumThreads) s += losses[r];
  s = block_sum<A, kBlockSumThreads>(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// Second pass: one block over the partials, in the same order.
template <class A>
__global__ void __launch_bounds__(kBlockSumThreads)
    cross_entropy_final_kernel(std::int64_t chunks, const A* partial, A normaliser, A* loss) {
  A s = 0;
  for (std::int64_t b = threadIdx.x; b < chunks; b += kBlockSumThreads) s += partial[b];
  s = block_sum<A, kBlockSumThreads>(s);
  if (threadIdx.x == 0) *loss = s / normaliser;
}

// A warp per row of the fused classifier (Note [Fused classifier]): each lane
// keeps a running max m and Σ exp(x - m), rescaling the sum when m grows, so
// the statistics take one read; the warp then combines its lanes' (m, s) and
// writes the row's gradient in a second read. Every lane reads x[t] before
// the warp's first write: dlogits may be logits. With `vec` (rows of whole
// 16-byte packs, both arrays aligned) a lane reads and writes a pack of L
// elements at a time, kBatch packs loaded before it uses (or, in the second
// pass, stores) any: a pack is read and written by one lane only, so in
// place is still safe, and a warp keeps kBatch · 512 bytes in flight
// instead of 64.
template <class T, class I>
struct FusedClassifierRow {
  using A = acc_t<T>;
  static constexpr int L = Pack<T>::kLen;
  static constexpr int kBatch = 4;
  std::int64_t vocab, cols;
  const T* logits;
  const I* targets;
  A scale;
  A* losses;
  T* dlogits;
  unsigned long long* flag;
  bool vec;
  // f(pack, p) for this lane's packs p of x below `packs` (p = lane, lane +
  // 32, ...), kBatch loaded before f sees the first of them.
  template <class F>
  __device__ static void for_lane_packs(const T* x, int lane, std::int64_t packs, const F& f) {
    for (std::int64_t p0 = lane; p0 < packs; p0 += kBatch * kWarpSize) {
      Pack<T> v[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b)
        if (p0 + b * kWarpSize < packs) v[b] = pack_at<L>(x, p0 + b * kWarpSize);
#pragma unroll
      for (int b = 0; b < kBatch; ++b)
        if (p0 + b * kWarpSize < packs) f(v[b], p0 + b * kWarpSize);
    }
  }
  __device__ void operator()(std::int64_t row, int lane) const {
    const T* x = logits + row * cols;
    T* dx = dlogits + row * cols;
    // A -inf logit (a masked column) adds nothing; exp(v - m) would be
    // exp(NaN) while m is -inf too. NaN still goes in.
    A m = load<A>(x[0]), s = 0;
    const auto take = [&](A v) {
      if (v > m) {
        s = s * exp_(m - v) + A(1);
        m = v;
      } else if (v != -A(INFINITY)) {
        s += exp_(v - m);
      }
    };
    std::int64_t first_scalar = 0;  // the elements before it went in packs
    if (vec) {
      const std::int64_t packs = vocab / L;
      for_lane_packs(x, lane, packs, [&](const Pack<T>& v, std::int64_t) {
#pragma unroll
        for (int j = 0; j < L; ++j) take(load<A>(v.v[j]));
      });
      first_scalar = packs * L;
    }
    for (std::int64_t i = first_scalar + lane; i < vocab; i += kWarpSize) take(load<A>(x[i]));
    const A row_max = warp_max(m);
    const A row_lse = row_max + log_(warp_sum(s * exp_(m - row_max)));
    const std::int64_t t = static_cast<std::int64_t>(targets[row]);
    // t >= vocab only with a flag (the host checked otherwise): ignored.
    const bool ignored = t < 0 || t >= vocab;
    const A xt = ignored ? A(0) : load<A>(x[t]);
    if (lane == 0) {
      if (t >= vocab && flag) record_bad_id(flag, row, t, unsigned(IdSource::target));
      losses[row] = ignored ? A(0) : row_lse - xt;
    }
    __syncwarp();
    const auto dlogit = [&](T v, std::int64_t i) {
      return ignored || i >= vocab
                 ? store<T>(A(0))
                 : store<T>(cross_entropy_dlogit(load<A>(v), row_lse, i == t, scale));
    };
    if (vec) {
      for_lane_packs(x, lane, cols / L, [&](const Pack<T>& v, std::int64_t p) {
        Pack<T> out;
#pragma unroll
        for (int j = 0; j < L; ++j) out.v[j] = dlogit(v.v[j], p * L + j);
        pack_at<L>(dx, p) = out;
      });
      return;
    }
    for (std::int64_t i = lane; i < cols; i += kWarpSize) dx[i] = dlogit(x[i], i);
  }
};

template <class T, class I>
struct CrossEntropyBackwardBody {
  using A = acc_t<T>;
  std::int64_t vocab;
  const T* logits;
  const I* targets;
  const A* lse;
  A scale;
  T* dlogits;
  unsigned long long* flag;
  __device__ void operator()(std::int64_t idx) const {
    const std::int64_t r = idx / vocab, i = idx % vocab;
    const std::int64_t t = static_cast<std::int64_t>(targets[r]);
    if (t >= vocab && i == 0 && flag) record_bad_id(flag, r, t, unsigned(IdSource::target));
    dlogits[idx] =
        t < 0 || t >= vocab
            ? store<T>(A(0))
            : store<T>(cross_entropy_dlogit(load<A>(logits[idx]), lse[r], i == t, scale));
  }
};

// loss = Σ losses / normaliser: the simple mean, or the fast two-pass one.
template <class A>
void launch_loss_mean(std::int64_t rows, const A* losses, double normaliser, A* loss, A* partials,
                      bool simple, cudaStream_t stream) {
  if (simple || rows == 0) {
    cross_entropy_sum_kernel<A><<<1, 1, 0, stream>>>(rows, losses, A(normaliser), loss);
    ZRT_CUDA_CHECK_LAUNCH();
    return;
  }
  const std::int64_t chunks = block_sum_chunks(rows);
  cross_entropy_partial_kernel<A><<<unsigned(chunks), kBlockSumThreads, 0, stream>>>(
      rows, block_sum_chunk_len(rows), losses, partials);
  ZRT_CUDA_CHECK_LAUNCH();
  cross_entropy_final_kernel<A>
      <<<1, kBlockSumThreads, 0, stream>>>(chunks, partials, A(normaliser), loss);
  ZRT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_cross_entropy_forward(DType dtype, std::int64_t rows, std::int64_t vocab,
                                  const void* logits, const void* targets, DType targets_dtype,
                                  double normaliser, void* losses, void* lse, void* loss,
                                  void* partials, bool simple, unsigned long long* flag,
                                  cudaStream_t stream) {
  dispatch<NnFloats>(dtype, "cross_entropy_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    dispatch<IdTypes>(targets_dtype, "cross_entropy_forward", [&](auto id_tag) {
      using I = typename decltype(id_tag)::type;
      for_each_warp_row(rows,
                        CrossEntropyRow<T, I>{vocab, static_cast<const T*>(logits),
                                              static_cast<const I*>(targets),
                                              static_cast<A*>(losses), static_cast<A*>(lse), flag},
                        stream);
    });
    launch_loss_mean<A>(rows, static_cast<const A*>(losses), normaliser, static_cast<A*>(loss),
                        static_cast<A*>(partials), simple, stream);
  });
}

void launch_cross_entropy_fused(DType dtype, std::int64_t rows, std::int64_t vocab,
                                std::int64_t cols, const void* logits, const void* targets,
                                DType targets_dtype, double normaliser, double scale, void* losses,
                                void* loss, void* dlogits, void* partials, bool simple,
                                unsigned long long* flag, cudaStream_t stream) {
  dispatch<NnFloats>(dtype, "cross_entropy_fused", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    dispatch<IdTypes>(targets_dtype, "cross_entropy_fused", [&](auto id_tag) {
      using I = typename decltype(id_tag)::type;
      for_each_warp_row(
          rows,
          FusedClassifierRow<T, I>{vocab, cols, static_cast<const T*>(logits),
                                   static_cast<const I*>(targets), A(scale),
                                   static_cast<A*>(losses), static_cast<T*>(dlogits), flag,
                                   cols % Pack<T>::kLen == 0 && pack_aligned(logits, dlogits)},
          stream);
    });
    launch_loss_mean<A>(rows, static_cast<const A*>(losses), normaliser, static_cast<A*>(loss),
                        static_cast<A*>(partials), simple, stream);
  });
}

void launch_cross_entropy_backward(DType dtype, std::int64_t rows, std::int64_t vocab,
                                   const void* logits, const void* targets, DType targets_dtype,
                                   const void* lse, double scale, void* dlogits,
                                   unsigned long long* flag, cudaStream_t stream) {
  dispatch<NnFloats>(dtype, "cross_entropy_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    dispatch<IdTypes>(targets_dtype, "cross_entropy_backward", [&](auto id_tag) {
      using I = typename decltype(id_tag)::type;
      for_each_index(rows * vocab,
                     CrossEntropyBackwardBody<T, I>{
                         vocab, static_cast<const T*>(logits), static_cast<const I*>(targets),
                         static_cast<const A*>(lse), A(scale), static_cast<T*>(dlogits), flag},
                     stream);
    });
  });
}

}  // namespace zrt::kernels::cuda
