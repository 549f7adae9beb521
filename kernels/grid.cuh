// The kernels' launch shapes, for .cu files: a thread per index over a
// grid-stride loop, or a warp per row. An op writes only the body, a functor
// with a __device__ operator(); grid sizing and the launch check live here.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "zrt/runtime/cuda_check.h"

// Checks the launch just issued, naming the caller's file and line.
#define ZRT_CUDA_CHECK_LAUNCH() ZRT_CUDA_CHECK(cudaGetLastError())

namespace zrt::kernels::cuda {

constexpr int kThreadsPerBlock = 256;
constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = kThreadsPerBlock / kWarpSize;

// The current device's multiprocessor count, asked of the driver once per
// device and cached in a function-local table of atomics (0: not asked yet;
// two threads asking at once store the same value).
inline int device_sm_count() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> counts[kMaxDevices] = {};
  int device = 0;
  ZRT_CUDA_CHECK(cudaGetDevice(&device));
  if (device < 0 || device >= kMaxDevices) device = 0;
  int count = counts[device].load(std::memory_order_relaxed);
  if (count == 0) {
    ZRT_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    count = std::max(count, 1);
    counts[device].store(count, std::memory_order_relaxed);
  }
  return count;
}

// Enough blocks to fill the current device several times over (16 blocks a
// multiprocessor); the loop strides past it.
inline unsigned grid_for(std::int64_t n) {
  std::int64_t blocks = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<unsigned>(
      std::clamp<std::int64_t>(blocks, 1, std::int64_t(device_sm_count()) * 16));
}

// The smaller of two indices, in device code.
__device__ inline std::int64_t min_i64(std::int64_t a, std::int64_t b) { return a < b ? a : b; }

// L elements of T read or written together: by default a 16-byte pack, the
// unit of a vector load or store; a longer L (a multiple of 16 bytes) is
// read or written as several 16-byte words.
template <class T, int L = 16 / int(sizeof(T))>
struct alignas(16) Pack {
  static_assert(L * sizeof(T) % 16 == 0, "a Pack spans whole 16-byte words");
  static constexpr int kLen = L;
  T v[L];
};

// The elements per pack of an op over several element types: one 16-byte
// word of the narrowest, so every array of the op moves in whole words.
template <class... T>
inline constexpr int kPackLen = std::max({Pack<T>::kLen...});

// Pack p of L elements of the array at `base` (pack_aligned), to read or write.
template <int L, class T>
__device__ inline const Pack<T, L>& pack_at(const T* base, std::int64_t p) {
  return reinterpret_cast<const Pack<T, L>*>(base)[p];
}
template <int L, class T>
__device__ inline Pack<T, L>& pack_at(T* base, std::int64_t p) {
  return reinterpret_cast<Pack<T, L>*>(base)[p];
}

// True when every one of the pointers is 16-byte aligned, so each can be
// read and written in Packs.
template <class... P>
inline bool pack_aligned(const P*... p) {
  return ((reinterpret_cast<std::uintptr_t>(p) % 16 == 0) && ...);
}

template <int L, class F>
__global__ void for_each_pack_kernel(std::int64_t n, F f) {
  const std::int64_t packs = n / L;
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  const std::int64_t first = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::int64_t p = first; p < packs; p += stride) f.pack(p);
  // The scalar tail: fewer than L elements past the last whole pack.
  if (first < n - packs * L) f(packs * L + first);
}

// Runs f(i) for every i in [0, n) on `stream`, as for_each_index, but L
// elements at a time: f.pack(p) does elements [p·L, p·L + L) with vector
// loads and stores, f(i) the tail past the last whole pack. Every pointer f
// reads or writes must be pack_aligned; the caller checks, and calls
// for_each_index instead when one is not. An op over one element type T
// takes for_each_pack<T> (L = Pack<T>::kLen); one over several,
// for_each_pack_of<kPackLen<...>>, reading each array as Pack<T, L>.
template <int L, class F>
void for_each_pack_of(std::int64_t n, const F& f, cudaStream_t stream) {
  if (n <= 0) return;
  const std::int64_t work = std::max<std::int64_t>(n / L, n % L);
  for_each_pack_kernel<L><<<grid_for(work), kThreadsPerBlock, 0, stream>>>(n, f);
  ZRT_CUDA_CHECK_LAUNCH();
}

// for_each_pack_of in 16-byte packs of T.
template <class T, class F>
void for_each_pack(std::int64_t n, const F& f, cudaStream_t stream) {
  for_each_pack_of<Pack<T>::kLen>(n, f, stream);
}

template <class F>
__global__ void for_each_index_kernel(std::int64_t n, F f) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    f(i);
}

// Runs f(i) for every i in [0, n) on `stream`.
template <class F>
void for_each_index(std::int64_t n, const F& f, cudaStream_t stream) {
  if (n <= 0) return;
  for_each_index_kernel<<<grid_for(n), kThreadsPerBlock, 0, stream>>>(n, f);
  ZRT_CUDA_CHECK_LAUNCH();
}

// The choice of every elementwise launcher: f in packs of L (for_each_pack_of)
// when `packed` (not forced simple, every pointer pack_aligned), otherwise a
// thread per index.
template <int L, class F>
void for_each_pack_of_or_index(std::int64_t n, const F& f, bool packed, cudaStream_t stream) {
  if (packed)
    for_each_pack_of<L>(n, f, stream);
  else
    for_each_index(n, f, stream);
}

// for_each_pack_of_or_index in 16-byte packs of T.
template <class T, class F>
void for_each_pack_or_index(std::int64_t n, const F& f, bool packed, cudaStream_t stream) {
  for_each_pack_of_or_index<Pack<T>::kLen>(n, f, packed, stream);
}

template <class F>
__global__ void for_each_warp_row_kernel(std::int64_t rows, F f) {
  const std::int64_t stride = std::int64_t(gridDim.x) * kWarpsPerBlock;
  // A warp's lanes share each row and step together, so f may use full-warp
  // shuffles (warp_reduce.cuh).
  for (std::int64_t row = std::int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
       row < rows; row += stride)
    f(row, int(threadIdx.x % kWarpSize));
}

// Runs f(row, lane) for every row in [0, rows) on `stream`, one warp per row
// and lane in [0, kWarpSize); the grid is capped as grid_for's and the warps
// stride over the rows beyond it.
template <class F>
void for_each_warp_row(std::int64_t rows, const F& f, cudaStream_t stream) {
  if (rows <= 0) return;
  for_each_warp_row_kernel<<<grid_for(rows * kWarpSize), kThreadsPerBlock, 0, stream>>>(rows, f);
  ZRT_CUDA_CHECK_LAUNCH();
}

}  // namespace zrt::kernels::cuda
