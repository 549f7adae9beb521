// The order of the CUDA kernels' deterministic sums, and its host emulation.
//
// Note [Deterministic block sums]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A fast CUDA sum of n terms (the cross-entropy loss mean) runs in an order
// that depends on n alone, never on the device, the grid or timing:
//  - the terms split into block_sum_chunks(n) consecutive chunks of
//    block_sum_chunk_len(n) terms (the last may be shorter), one per block;
//  - in a block of kBlockSumThreads threads, thread j sums its chunk's terms
//    j, j + kBlockSumThreads, ... in order; each warp of 32 then combines
//    its lanes by an xor butterfly (offsets 16, 8, 4, 2, 1: lane l adds lane
//    l ^ offset), and warp 0 combines the warps' sums the same way, its
//    lanes past the warp count holding 0;
//  - a final single block sums the chunks' partials the same way.
// block_tree_sum emulates that order on the host, so a test can check a
// GPU sum bit for bit (additions alone: no multiply-add to contract).
#pragma once

#include <algorithm>
#include <cstdint>

namespace zrt::kernels {

inline constexpr int kBlockSumThreads = 256;
inline constexpr int kBlockSumMaxChunks = 256;

// Terms per chunk (block): about 8 a thread, more when that would take over
// kBlockSumMaxChunks chunks.
inline std::int64_t block_sum_chunk_len(std::int64_t n) {
  if (n <= 0) return 1;
  const std::int64_t per_block = std::int64_t(kBlockSumThreads) * 8;
  const std::int64_t chunks =
      std::clamp<std::int64_t>((n + per_block - 1) / per_block, 1, kBlockSumMaxChunks);
  return (n + chunks - 1) / chunks;
}

// Chunks of that length to cover the n terms, none empty (at least 1).
inline std::int64_t block_sum_chunks(std::int64_t n) {
  const std::int64_t len = block_sum_chunk_len(n);
  return n <= 0 ? 1 : (n + len - 1) / len;
}

// The warps' xor butterfly over 32 lane values, in place.
template <class A>
void warp_butterfly_host(A* lanes) {
  for (int offset = 16; offset > 0; offset /= 2) {
    A next[32];
    for (int l = 0; l < 32; ++l) next[l] = lanes[l] + lanes[l ^ offset];
    std::copy(next, next + 32, lanes);
  }
}

// One block's sum of term(i), i in [lo, hi), in the kernels' order.
template <class A, class Term>
A block_sum_host(std::int64_t lo, std::int64_t hi, const Term& term) {
  A thread[kBlockSumThreads] = {};
  for (int j = 0; j < kBlockSumThreads; ++j)
    for (std::int64_t i = lo + j; i < hi; i += kBlockSumThreads) thread[j] += term(i);
  constexpr int kWarps = kBlockSumThreads / 32;
  A warp0[32] = {};
  for (int w = 0; w < kWarps; ++w) {
    warp_butterfly_host(thread + 32 * w);
    warp0[w] = thread[32 * w];
  }
  warp_butterfly_host(warp0);
  return warp0[0];
}

// Σ term(i) for i in [0, n) in the order of Note [Deterministic block sums].
template <class A, class Term>
A block_tree_sum(std::int64_t n, const Term& term) {
  const std::int64_t chunks = block_sum_chunks(n), len = block_sum_chunk_len(n);
  A partial[kBlockSumMaxChunks] = {};
  for (std::int64_t b = 0; b < chunks; ++b)
    partial[b] = block_sum_host<A>(std::min(n, b * len), std::min(n, (b + 1) * len), term);
  return block_sum_host<A>(0, chunks, [&](std::int64_t b) { return partial[b]; });
}

}  // namespace zrt::kernels
