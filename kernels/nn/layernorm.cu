#include <type_traits>

#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/nn/layernorm.cuh"
#include "zrt/kernels/nn/layernorm_math.h"
#include "zrt/kernels/nn/warp_reduce.cuh"

namespace zrt::kernels::cuda {
namespace {

// A warp per row: two passes (mean, then squared deviations) as the CPU twin.
template <class T>
struct LayerNormForwardRow {
  using A = acc_t<T>;
  std::int64_t c;
  const T* x;
  const T* w;
  const T* b;
  T* y;
  A* mean;
  A* rstd;
  A eps;
  __device__ void operator()(std::int64_t row, int lane) const {
    const T* xr = x + row * c;
    A sum = 0;
    for (std::int64_t i = lane; i < c; i += kWarpSize) sum += load<A>(xr[i]);
    const A mu = warp_sum(sum) / A(c);
    A sq = 0;
    for (std::int64_t i = lane; i < c; i += kWarpSize) {
      const A d = load<A>(xr[i]) - mu;
      sq += d * d;
    }
    const A rs = layernorm_rstd(warp_sum(sq), c, eps);
    for (std::int64_t i = lane; i < c; i += kWarpSize)
      y[row * c + i] =
          store<T>(layernorm_out(load<A>(xr[i]), mu, rs, load<A>(w[i]), load<A>(b[i])));
    if (lane == 0) {
      mean[row] = mu;
      rstd[row] = rs;
    }
  }
};

template <class T>
struct LayerNormDxRow {
  using A = acc_t<T>;
  std::int64_t c;
  const T* dy;
  const T* x;
  const T* w;
  const A* mean;
  const A* rstd;
  T* dx;
  __device__ void operator()(std::int64_t row, int lane) const {
    const T* xr = x + row * c;
    const T* dyr = dy + row * c;
    const A mu = mean[row], rs = rstd[row];
    A sum_g = 0, sum_gx = 0;
    for (std::int64_t i = lane; i < c; i += kWarpSize) {
      const A g = load<A>(dyr[i]) * load<A>(w[i]);
      sum_g += g;
      sum_gx += g * (load<A>(xr[i]) - mu) * rs;
    }
    const A mean_g = warp_sum(sum_g) / A(c), mean_gx = warp_sum(sum_gx) / A(c);
    for (std::int64_t i = lane; i < c; i += kWarpSize) {
      const A g = load<A>(dyr[i]) * load<A>(w[i]);
      dx[row * c + i] = store<T>(layernorm_dx(g, (load<A>(xr[i]) - mu) * rs, mean_g, mean_gx, rs));
    }
  }
};

// A thread per feature, rows in order: deterministic parameter gradients.
template <class T>
struct LayerNormParamGradBody {
  using A = acc_t<T>;
  std::int64_t rows, c;
  const T* dy;
  const T* x;
  const A* mean;
  const A* rstd;
  T* dw;
  T* db;
  bool accumulate;
  __device__ void operator()(std::int64_t i) const {
    A sw = accumulate ? load<A>(dw[i]) : A(0), sb = accumulate ? load<A>(db[i]) : A(0);
    A gw = 0, gb = 0;
    for (std::int64_t r = 0; r < rows; ++r)
      layernorm_param_grad_add(gw, gb, load<A>(dy[r * c + i]), load<A>(x[r * c + i]), mean[r],
                               rstd[r]);
    dw[i] = store<T>(sw + gw);
    db[i] = store<T>(sb + gb);
  }
};

// The fast parameter gradients, first pass: block (x, y) covers 32·V
// features from 32·V·x and row tile y; its warps (kLayerNormTileLanes of
// them) stride the tile's rows, each lane V adjacent features (one 16-byte
// pack of dy and of x per row where the rows are pack-aligned, V = 1
// otherwise), and the block then adds the warps' sums in warp order into the
// tile's partials. Each feature's order of additions is the one
// layernorm_math.h states, whatever V.
constexpr int kLayerNormTileThreads = kLayerNormTileLanes * kWarpSize;

template <class T, int V>
__global__ void __launch_bounds__(kLayerNormTileThreads)
    layernorm_param_partial_kernel(std::int64_t rows, std::int64_t c, std::int64_t tile_len,
                                   const T* dy, const T* x, const acc_t<T>* mean,
                                   const acc_t<T>* rstd, acc_t<T>* part_w, acc_t<T>* part_b) {
  using A = acc_t<T>;
  constexpr int kCols = kWarpSize * V;  // the block's features
  __shared__ A sw[kLayerNormTileLanes][kCols], sb[kLayerNormTileLanes][kCols];
  const int lane = int(threadIdx.x) % kWarpSize, j = int(threadIdx.x) / kWarpSize;
  const std::int64_t first = std::int64_t(blockIdx.x) * kCols;
  const std::int64_t col = first + std::int64_t(lane) * V;  // the lane's first feature
  const std::int64_t lo = min_i64(rows, std::int64_t(blockIdx.y) * tile_len);
  const std::int64_t hi = min_i64(rows, lo + tile_len);
  A gw[V] = {}, gb[V] = {};
  if (col < c) {  // with V > 1, c is a multiple of V: the lane's features are all in
    for (std::int64_t r = lo + j; r < hi; r += kLayerNormTileLanes) {
      const A mu = mean[r], rs = rstd[r];
      if constexpr (V == 1) {
        layernorm_param_grad_add(gw[0], gb[0], load<A>(dy[r * c + col]), load<A>(x[r * c + col]),
                                 mu, rs);
      } else {
        const Pack<T, V> d = pack_at<V>(dy + r * c, col / V), xs = pack_at<V>(x + r * c, col / V);
#pragma unroll
        for (int v = 0; v < V; ++v)
          layernorm_param_grad_add(gw[v], gb[v], load<A>(d.v[v]), load<A>(xs.v[v]), mu, rs);
      }
    }
  }
#pragma unroll
  for (int v = 0; v < V; ++v) {
    sw[j][lane * V + v] = gw[v];
    sb[j][lane * V + v] = gb[v];
  }
  __syncthreads();
  for (int f = int(threadIdx.x); f < kCols; f += kLayerNormTileThreads) {
    if (first + f >= c) break;
    A w = 0, b = 0;
    for (int k = 0; k < kLayerNormTileLanes; ++k) {
      w += sw[k][f];
      b += sb[k][f];
    }
    part_w[std::int64_t(blockIdx.y) * c + first + f] = w;
    part_b[std::int64_t(blockIdx.y) * c + first + f] = b;
  }
}

// Second pass: a thread per feature adds the tiles' partials in tile order,
// loading kAhead tiles before adding them so that the loads overlap (one at
// a time, 128 tiles of GPT-2 124M's rows took 16.5 µs a call on an H200).
template <class T>
struct LayerNormParamFinalBody {
  using A = acc_t<T>;
  static constexpr int kAhead = 8;
  std::int64_t tiles, c;
  const A* part_w;
  const A* part_b;
  T* dw;
  T* db;
  bool accumulate;
  __device__ void operator()(std::int64_t i) const {
    A gw = 0, gb = 0;
    std::int64_t t = 0;
    for (; t + kAhead <= tiles; t += kAhead) {
      A w[kAhead], b[kAhead];
#pragma unroll
      for (int u = 0; u < kAhead; ++u) {
        w[u] = part_w[(t + u) * c + i];
        b[u] = part_b[(t + u) * c + i];
      }
#pragma unroll
      for (int u = 0; u < kAhead; ++u) {
        gw += w[u];
        gb += b[u];
      }
    }
    for (; t < tiles; ++t) {
      gw += part_w[t * c + i];
      gb += part_b[t * c + i];
    }
    dw[i] = store<T>((accumulate ? load<A>(dw[i]) : A(0)) + gw);
    db[i] = store<T>((accumulate ? load<A>(db[i]) : A(0)) + gb);
  }
};

}  // namespace

void launch_layernorm_forward(DType dtype, std::int64_t rows, std::int64_t c, const void* x,
                              const void* weight, const void* bias, void* y, void* mean, void* rstd,
                              double eps, cudaStream_t stream) {
  dispatch<NnFloats>(dtype, "layernorm_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    for_each_warp_row(
        rows,
        LayerNormForwardRow<T>{c, static_cast<const T*>(x), static_cast<const T*>(weight),
                               static_cast<const T*>(bias), static_cast<T*>(y),
                               static_cast<A*>(mean), static_cast<A*>(rstd), A(eps)},
        stream);
  });
}

void launch_layernorm_backward(DType dtype, std::int64_t rows, std::int64_t c, const void* dy,
                               const void* x, const void* weight, const void* mean,
                               const void* rstd, void* dx, void* dweight, void* dbias,
                               bool accumulate_param_grads, void* partials, bool simple,
                               cudaStream_t stream) {
  dispatch<NnFloats>(dtype, "layernorm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    // Parameter gradients first: dx may overwrite dy.
    if (!simple) {
      const std::int64_t tiles = layernorm_param_tiles(rows);
      A* part_w = static_cast<A*>(partials);
      A* part_b = part_w + tiles * c;
      auto partial = [&](auto v) {
        constexpr int V = decltype(v)::value;
        const dim3 grid(unsigned((c + kWarpSize * V - 1) / (kWarpSize * V)), unsigned(tiles));
        layernorm_param_partial_kernel<T, V><<<grid, kLayerNormTileThreads, 0, stream>>>(
            rows, c, layernorm_param_tile_len(rows), static_cast<const T*>(dy),
            static_cast<const T*>(x), static_cast<const A*>(mean), static_cast<const A*>(rstd),
            part_w, part_b);
        ZRT_CUDA_CHECK_LAUNCH();
      };
      // Rows in 16-byte packs where every row starts on one.
      constexpr int kV = Pack<T>::kLen;
      if (c % kV == 0 && pack_aligned(dy, x))
        partial(std::integral_constant<int, kV>{});
      else
        partial(std::integral_constant<int, 1>{});
      for_each_index(c,
                     LayerNormParamFinalBody<T>{tiles, c, part_w, part_b, static_cast<T*>(dweight),
                                                static_cast<T*>(dbias), accumulate_param_grads},
                     stream);
    } else {
      for_each_index(c,
                     LayerNormParamGradBody<T>{
                         rows, c, static_cast<const T*>(dy), static_cast<const T*>(x),
                         static_cast<const A*>(mean), static_cast<const A*>(rstd),
                         static_cast<T*>(dweight), static_cast<T*>(dbias), accumulate_param_grads},
                     stream);
    }
    for_each_warp_row(rows,
                      LayerNormDxRow<T>{c, static_cast<const T*>(dy), static_cast<const T*>(x),
                                        static_cast<const T*>(weight), static_cast<const A*>(mean),
                                        static_cast<const A*>(rstd), static_cast<T*>(dx)},
                      stream);
  });
}

}  // namespace zrt::kernels::cuda
