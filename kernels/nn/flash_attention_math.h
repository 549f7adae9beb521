// Flash attention on the tensor cores: tiles in shared memory, products as
// warp-wide mma.sync m16n8k16 (bf16/f16 in, fp32 accumulation), an online
// softmax, O(T) memory, deterministic. One code for the CUDA kernels and a
// host emulation of their blocks, warps, lanes and fragments.
//
// Note [Flash attention on tensor cores]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Per (batch, head) pair, blocks of kFlashWarps warps own kFlashRows = 64
// rows (16 a warp) and walk the other side in tiles of 64:
//   forward   a block per query tile: S = s·Q·Kᵀ per key tile, the running
//             max and sum per row (online softmax), O += P·V, then O / l and
//             lse = m + log l (the lse of Note [Attention without the T×T
//             matrix]);
//   backward  D = dO·O per row first; a block per key tile accumulates dK
//             and dV over the query tiles (Sᵀ = K·Qᵀ, Pᵀ from lse,
//             dV += Pᵀ·dO, dPᵀ = V·dOᵀ, dSᵀ = Pᵀ·(dPᵀ - D), dK += dSᵀ·Q),
//             and a block per query tile accumulates dQ over the key tiles
//             (S, P, dP = dO·Vᵀ, dS, dQ += dS·K).
// Every output element is summed by one lane in a fixed order: no atomics,
// and runs are bit-identical. Each product is a chain of mma.sync
// m16n8k16: A (16 × 16, row-major) in 4 registers of 2 elements a lane, B
// (16 × 8, column-major) in 2, C (16 × 8, fp32) in 4; which elements a lane
// holds is flash_a/b/c_element below (PTX ISA, "Matrix Fragments for
// mma.m16n8k16"). The accumulator layout of a 16 × 16 slice of S is the A
// layout of P for the next product, so P never leaves the registers
// (flash_pack_a). Probabilities and dS are rounded to the activation dtype
// before their products, as the tensor cores take them. The fragments come
// from shared memory by ldmatrix.x4, an A fragment or two n-tiles' B
// fragments an instruction, from row addresses each lane gives
// (flash_ldm_*_row; the element-wise flash_load_* are their specification).
// The causal and sequence masks cost comparisons per element, so a warp's
// tile that no mask touches (most of a causal walk) skips them
// (flash_with_mask).
//
// The code is written once over two policies: a Block (threads striding
// over a tile's elements, a barrier) and Warps, whose lane code runs for
// one lane on the GPU and for all 32 lanes of each warp in turn on the host;
// what crosses lanes (the mma, the sums and maxima over a quad of lanes
// sharing a row) is a Warp method: shuffles and mma.sync on the GPU, loops
// over the lanes' registers by the fragment maps on the host, and ldmatrix
// by its distribution rule. The host emulation (flash_attention_*_host)
// runs the blocks in order, so the CPU tests check the tile walk, the
// masks, the fragment maps, the ldmatrix addresses and the arithmetic; only
// the instructions themselves are left to the gpu suites.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "zrt/kernels/attention_dims.h"
#include "zrt/kernels/nn/attention_math.h"
#include "zrt/kernels/nn/element.h"
#include "zrt/runtime/float16.h"

namespace zrt::kernels {

// Loops over a lane's registers unrolled on the GPU, so the registers stay
// registers; the host compiler sees a plain loop.
#if defined(__CUDA_ARCH__)
#define ZRT_FLASH_UNROLL _Pragma("unroll")
#else
#define ZRT_FLASH_UNROLL
#endif

inline constexpr int kFlashWarps = 4;
inline constexpr int kFlashThreads = 32 * kFlashWarps;
inline constexpr int kFlashRows = 16 * kFlashWarps;  // a block's query (or key) rows
inline constexpr int kFlashCols = 64;                // the other side's tile
static_assert(kFlashRows == kFlashCols, "the backward's causal tile walk assumes square tiles");

// The head dims the kernels are built for (a multiple of the mma's k = 16).
ZRT_HD inline bool flash_head_dim_supported(std::int64_t hd) {
  return hd == 16 || hd == 32 || hd == 64 || hd == 128;
}

// Shared-memory row stride of a tile of hd columns: 8 elements of padding
// spread a fragment's rows over the banks.
ZRT_HD inline int flash_ld(int hd) { return hd + 8; }

// Shared memory of each kernel, in elements of the activation dtype (the
// row statistics, fp32, counted as two elements each).
ZRT_HD inline std::int64_t flash_forward_smem(int hd) { return 3 * kFlashRows * flash_ld(hd); }
ZRT_HD inline std::int64_t flash_backward_smem(int hd) {
  return 4 * kFlashRows * flash_ld(hd) + 2 * 2 * kFlashRows;
}

// --- fragment maps (m16n8k16) ----------------------------------------------
// Lane l holds, in register r (0..3 for A, 0..1 for B) half h (0: the low 16
// bits), element (row, col) of A / (k, n) of B; C register r (0..3) holds
// (row, col) of the 16 × 8 accumulator.
struct FlashElem {
  int row, col;
};
ZRT_HD inline FlashElem flash_a_element(int lane, int r, int h) {
  return {(lane >> 2) + 8 * (r & 1), (lane & 3) * 2 + h + 8 * (r >> 1)};
}
ZRT_HD inline FlashElem flash_b_element(int lane, int r, int h) {
  return {(lane & 3) * 2 + h + 8 * r, lane >> 2};
}
ZRT_HD inline FlashElem flash_c_element(int lane, int r) {
  return {(lane >> 2) + 8 * (r >> 1), (lane & 3) * 2 + (r & 1)};
}

// Two 16-bit elements in one register, the first in the low half.
template <class T>
ZRT_HD std::uint32_t flash_pack(T lo, T hi) {
  return std::uint32_t(lo.bits) | (std::uint32_t(hi.bits) << 16);
}
template <class T>
ZRT_HD T flash_half(std::uint32_t reg, int h) {
  return T{std::uint16_t(h ? reg >> 16 : reg & 0xffffu)};
}

// The N registers of a fragment of a tile: register r packs the elements at
// tile + at(r) (the low half) and `next` after it.
template <int N, class T, class At>
ZRT_HD void flash_load_fragment(const T* tile, int next, std::uint32_t* regs, const At& at) {
  ZRT_FLASH_UNROLL
  for (int r = 0; r < N; ++r) {
    const T* p = tile + at(r);
    regs[r] = flash_pack(p[0], p[next]);
  }
}

// The A fragment of a 16 × 16 slice of a row-major tile at (row0, col0).
template <class T>
ZRT_HD void flash_load_a(const T* tile, int ld, int row0, int col0, int lane, std::uint32_t a[4]) {
  flash_load_fragment<4>(tile, 1, a, [&](int r) {
    const FlashElem e = flash_a_element(lane, r, 0);
    return (row0 + e.row) * ld + col0 + e.col;
  });
}

// The B fragment (k × n = 16 × 8) of the transpose of a row-major tile:
// B(k, n) = tile[n0 + n][k0 + k] (keys as rows, head features as k).
template <class T>
ZRT_HD void flash_load_b_transposed(const T* tile, int ld, int n0, int k0, int lane,
                                    std::uint32_t b[2]) {
  flash_load_fragment<2>(tile, 1, b, [&](int r) {
    const FlashElem e = flash_b_element(lane, r, 0);
    return (n0 + e.col) * ld + k0 + e.row;
  });
}

// The B fragment of a row-major tile itself: B(k, n) = tile[k0 + k][n0 + n].
template <class T>
ZRT_HD void flash_load_b(const T* tile, int ld, int k0, int n0, int lane, std::uint32_t b[2]) {
  flash_load_fragment<2>(tile, ld, b, [&](int r) {
    const FlashElem e = flash_b_element(lane, r, 0);
    return (k0 + e.row) * ld + n0 + e.col;
  });
}

// The A fragment, for k-slice kk, of a 16 × 64 accumulator s[8][4] (eight
// n-tiles of 8 columns) rounded to T: the accumulator layout of n-tiles
// 2kk and 2kk + 1 is the A layout of columns [16kk, 16kk + 16).
template <class T>
ZRT_HD void flash_pack_a(const float (*s)[4], int kk, std::uint32_t a[4]) {
  const float* lo = s[2 * kk];
  const float* hi = s[2 * kk + 1];
  a[0] = flash_pack(store<T>(lo[0]), store<T>(lo[1]));
  a[1] = flash_pack(store<T>(lo[2]), store<T>(lo[3]));
  a[2] = flash_pack(store<T>(hi[0]), store<T>(hi[1]));
  a[3] = flash_pack(store<T>(hi[2]), store<T>(hi[3]));
}

// --- fragments by ldmatrix ----------------------------------------------------
// ldmatrix.m8n8.x4 loads four 8 × 8 matrices of 16-bit elements, a warp at
// once: lane 8m + r gives the address of row r of matrix m (16 bytes, all
// of it), and lane l receives in register m the two elements of matrix m at
// row l / 4, columns 2(l % 4) and 2(l % 4) + 1 (with .trans, of its
// transpose: rows 2(l % 4) and 2(l % 4) + 1 of column l / 4). So the lane
// fragments of flash_load_a and flash_load_b(_transposed) above, which are
// the mma's, come in one instruction for A and for two n-tiles of B, from
// the row addresses below; shared-memory rows (flash_ld) are 16-byte
// aligned, and their padding puts a matrix's 8 rows in distinct banks.

// The row lane gives for A = rows [row0, row0 + 16) x cols [col0, col0 + 16)
// of a row-major tile: registers a[0..3] as flash_load_a's.
template <class T>
ZRT_HD const T* flash_ldm_a_row(const T* tile, int ld, int row0, int col0, int lane) {
  const int m = lane >> 3, r = lane & 7;
  return tile + (row0 + 8 * (m & 1) + r) * ld + col0 + 8 * (m >> 1);
}

// The row lane gives for the B fragments of n-tiles n0 and n0 + 8 of the
// transpose of a row-major tile (B(k, n) = tile[n][k], k from k0): registers
// 0, 1 as flash_load_b_transposed's at n0, registers 2, 3 at n0 + 8.
template <class T>
ZRT_HD const T* flash_ldm_bt_row(const T* tile, int ld, int n0, int k0, int lane) {
  const int m = lane >> 3, r = lane & 7;
  return tile + (n0 + 8 * (m >> 1) + r) * ld + k0 + 8 * (m & 1);
}

// The row lane gives (with .trans) for the B fragments of n-tiles n0 and
// n0 + 8 of a row-major tile itself (B(k, n) = tile[k][n], k from k0):
// registers 0, 1 as flash_load_b's at n0, registers 2, 3 at n0 + 8.
template <class T>
ZRT_HD const T* flash_ldm_b_row(const T* tile, int ld, int k0, int n0, int lane) {
  const int m = lane >> 3, r = lane & 7;
  return tile + (k0 + 8 * (m & 1) + r) * ld + n0 + 8 * (m >> 1);
}

// --- the host's warp ---------------------------------------------------------

// The 32 lanes of a warp on the host: lane code runs for each lane in turn;
// mma and the quad reductions read and write every lane's registers.
struct FlashHostWarp {
  static constexpr int kLanes = 32;
  static int lane(int i) { return i; }

  // c[i] += a[i] · b[i] over the warp, by the fragment maps; a_of(i) and
  // b_of(i) give lane i's registers, c_of(i) its 4 accumulators.
  template <class T, class AOf, class BOf, class COf>
  static void mma(const AOf& a_of, const BOf& b_of, const COf& c_of) {
    float a[16][16], b[16][8], c[16][8];
    for (int l = 0; l < 32; ++l) {
      const std::uint32_t* ar = a_of(l);
      const std::uint32_t* br = b_of(l);
      const float* cr = c_of(l);
      ZRT_FLASH_UNROLL
      for (int r = 0; r < 4; ++r) ZRT_FLASH_UNROLL
      for (int h = 0; h < 2; ++h) {
        const FlashElem e = flash_a_element(l, r, h);
        a[e.row][e.col] = to_f32(flash_half<T>(ar[r], h));
      }
      ZRT_FLASH_UNROLL
      for (int r = 0; r < 2; ++r) ZRT_FLASH_UNROLL
      for (int h = 0; h < 2; ++h) {
        const FlashElem e = flash_b_element(l, r, h);
        b[e.row][e.col] = to_f32(flash_half<T>(br[r], h));
      }
      ZRT_FLASH_UNROLL
      for (int r = 0; r < 4; ++r) {
        const FlashElem e = flash_c_element(l, r);
        c[e.row][e.col] = cr[r];
      }
    }
    for (int l = 0; l < 32; ++l) {
      float* cr = c_of(l);
      ZRT_FLASH_UNROLL
      for (int r = 0; r < 4; ++r) {
        const FlashElem e = flash_c_element(l, r);
        float sum = c[e.row][e.col];
        ZRT_FLASH_UNROLL
        for (int k = 0; k < 16; ++k) sum += a[e.row][k] * b[k][e.col];
        cr[r] = sum;
      }
    }
  }

  // ldmatrix.m8n8.x4 (.trans when kTrans): row_of(i) is the row lane i
  // gives, regs_of(i) lane i's four registers.
  template <bool kTrans, class T, class RowOf, class RegsOf>
  static void ldmatrix_x4(const RowOf& row_of, const RegsOf& regs_of) {
    for (int l = 0; l < 32; ++l) {
      std::uint32_t* regs = regs_of(l);
      for (int m = 0; m < 4; ++m) {
        T e[2];
        for (int h = 0; h < 2; ++h) {
          const int row = kTrans ? 2 * (l & 3) + h : l >> 2;
          const int col = kTrans ? l >> 2 : 2 * (l & 3) + h;
          const T* p = row_of(8 * m + row);
          e[h] = p[col];
        }
        regs[m] = flash_pack(e[0], e[1]);
      }
    }
  }

  // v[i] = the max / sum of v over the four lanes of i's quad (the lanes
  // sharing an accumulator row), for every lane.
  template <class Of>
  static void quad_max(const Of& v) {
    quad(v, [](float x, float y) { return x > y ? x : y; });
  }
  template <class Of>
  static void quad_sum(const Of& v) {
    quad(v, [](float x, float y) { return x + y; });
  }

 private:
  // The xor butterfly of the GPU's shuffles (offsets 1, 2).
  template <class Of, class Op>
  static void quad(const Of& v, const Op& op) {
    for (int offset = 1; offset < 4; offset *= 2) {
      float next[32];
      for (int l = 0; l < 32; ++l) next[l] = op(*v(l), *v(l ^ offset));
      for (int l = 0; l < 32; ++l) *v(l) = next[l];
    }
  }
};

// --- lane state and steps -------------------------------------------------

// Row statistics of a lane: rows g and g + 8 of its warp's 16.
struct FlashRowStats {
  float m[2], l[2];
};

// A forward lane: its output accumulators and row statistics.
template <int HD>
struct FlashForwardLane {
  float o[std::size_t{HD / 8}][4];  // HD / 8 n-tiles of 8 columns
  FlashRowStats st;
};

// 16 × 64 products of a warp: acc[nt] over eight n-tiles of 8 columns.
struct FlashTile16x64 {
  float acc[8][4];
};

// A block's (batch, head) pair and the score scale 1/sqrt(hd).
struct FlashPair : AttentionPair {
  float scale;
  ZRT_HD FlashPair(const AttentionDims& d, std::int64_t pair)
      : AttentionPair(d, pair), scale(float(attention_scale<double>(d.head_dim))) {}
};

// 16 bytes, moved as one vector load and store.
struct alignas(16) FlashVec16 {
  std::uint32_t w[4];
};

// Whether a call's tiles move in 16-byte vectors: every row of every slice
// starts on 16 bytes when the activations' base pointers do (rows are 3C or
// C elements apart and slices start at multiples of hd, all multiples of 8
// elements, since hd is a multiple of 16); shared-memory rows are hd + 8
// elements apart.
inline bool flash_vector_tiles(const void* qkv, const void* other) {
  return reinterpret_cast<std::uintptr_t>(qkv) % 16 == 0 &&
         reinterpret_cast<std::uintptr_t>(other) % 16 == 0;
}

// Copies rows [r0, r0 + n) of a [T, hd] slice (rows `stride` apart) into a
// tile of kFlashRows rows, zeros past n; in 16-byte vectors when blk.vec.
template <class T, class Block>
ZRT_HD void flash_load_tile(const Block& blk, T* tile, int hd, const T* src, std::int64_t stride,
                            std::int64_t r0, std::int64_t n) {
  const int ld = flash_ld(hd);
  if (blk.vec) {
    constexpr int kPer = 16 / int(sizeof(T));
    const int chunks = hd / kPer;
    blk.for_each(kFlashRows * chunks, [&](int idx) {
      const int r = idx / chunks, col = (idx % chunks) * kPer;
      FlashVec16 v{};
      if (r < n) v = *reinterpret_cast<const FlashVec16*>(src + (r0 + r) * stride + col);
      *reinterpret_cast<FlashVec16*>(tile + r * ld + col) = v;
    });
    return;
  }
  blk.for_each(kFlashRows * hd, [&](int idx) {
    const int r = idx / hd, col = idx % hd;
    tile[r * ld + col] = r < n ? src[(r0 + r) * stride + col] : store<T>(0.0f);
  });
}

// Rows [k0, k0 + kn) of a pair's keys and values (base: its query row 0 in
// qkv) into k_tile and v_tile, zeros past kn.
template <class T, class Block>
ZRT_HD void flash_load_kv_tile(const Block& blk, T* k_tile, T* v_tile, int hd, const T* base,
                               const FlashPair& pr, std::int64_t k0, std::int64_t kn) {
  flash_load_tile(blk, k_tile, hd, base + pr.c, pr.s3, k0, kn);
  flash_load_tile(blk, v_tile, hd, base + 2 * pr.c, pr.s3, k0, kn);
}

// acc_of(i)[nt] and [nt + 1] += A · B over a warp, for the two n-tiles
// whose B fragments ldmatrix loads from the rows row_of(i) gives (.trans
// when kTrans).
template <bool kTrans, class T, class W, class AOf, class RowOf, class AccOf>
ZRT_HD void flash_mma_two_ntiles(const W& w, const AOf& a_of, const RowOf& row_of,
                                 const AccOf& acc_of, int nt) {
  std::uint32_t b[W::kLanes][4];
  w.template ldmatrix_x4<kTrans, T>(row_of, [&](int i) { return b[i]; });
  ZRT_FLASH_UNROLL
  for (int half = 0; half < 2; ++half)
    w.template mma<T>(
        a_of, [&](int i) { return b[i] + 2 * half; }, [&](int i) { return acc_of(i)[nt + half]; });
}

// S (or Sᵀ, dP, dPᵀ) of a warp: acc = Σ_kk A(rows [a_row0, +16) of a_tile,
// cols kk) · B(rows [0, 64) of b_tile transposed), over hd / 16 slices.
template <class T, int HD, class W, class Lanes>
ZRT_HD void flash_warp_qk(const W& w, Lanes* lanes, const T* a_tile, int a_row0, const T* b_tile) {
  const int ld = flash_ld(HD);
  for (int i = 0; i < W::kLanes; ++i) ZRT_FLASH_UNROLL
  for (int nt = 0; nt < 8; ++nt) ZRT_FLASH_UNROLL
  for (int r = 0; r < 4; ++r) lanes[i].acc[nt][r] = 0.0f;
  ZRT_FLASH_UNROLL
  for (int kk = 0; kk < HD / 16; ++kk) {
    std::uint32_t a[W::kLanes][4];
    w.template ldmatrix_x4<false, T>(
        [&](int i) { return flash_ldm_a_row(a_tile, ld, a_row0, kk * 16, w.lane(i)); },
        [&](int i) { return a[i]; });
    ZRT_FLASH_UNROLL
    for (int nt = 0; nt < 8; nt += 2)
      flash_mma_two_ntiles<false, T>(
          w, [&](int i) { return a[i]; },
          [&](int i) { return flash_ldm_bt_row(b_tile, ld, nt * 8, kk * 16, w.lane(i)); },
          [&](int i) { return lanes[i].acc; }, nt);
  }
}

// out[nt] += P · tile over 64 rows of `tile` (P the 16 × 64 probabilities
// `p`, rounded to T): O += P·V, dV += Pᵀ·dO, dK += dSᵀ·Q, dQ += dS·K.
template <class T, int HD, class W, class POf, class OutOf>
ZRT_HD void flash_warp_pv(const W& w, const POf& p_of, const T* tile, const OutOf& out_of) {
  const int ld = flash_ld(HD);
  ZRT_FLASH_UNROLL
  for (int kk = 0; kk < 4; ++kk) {
    std::uint32_t a[W::kLanes][4];
    for (int i = 0; i < W::kLanes; ++i) flash_pack_a<T>(p_of(i), kk, a[i]);
    ZRT_FLASH_UNROLL
    for (int nt = 0; nt < HD / 8; nt += 2)
      flash_mma_two_ntiles<true, T>(
          w, [&](int i) { return a[i]; },
          [&](int i) { return flash_ldm_b_row(tile, ld, kk * 16, nt * 8, w.lane(i)); }, out_of, nt);
  }
}

// Accumulator element (nt, r) of a lane: its row (0..15) and column (0..63).
ZRT_HD inline FlashElem flash_acc_element(int lane, int nt, int r) {
  const FlashElem e = flash_c_element(lane, r);
  return {e.row, nt * 8 + e.col};
}

// Runs f(nt, r) for each accumulator register of a lane's HD / 8 n-tiles.
template <int HD, class F>
ZRT_HD void flash_for_each_acc(const F& f) {
  ZRT_FLASH_UNROLL
  for (int nt = 0; nt < HD / 8; ++nt) ZRT_FLASH_UNROLL
  for (int r = 0; r < 4; ++r) f(nt, r);
}

// Stores value(nt, r) of each accumulator register of a lane of warp `warp`
// to its row of a block's rows from r0 (those before seq) in dst, rows
// `stride` apart.
template <class T, int HD, class Value>
ZRT_HD void flash_store_rows(T* dst, std::int64_t stride, std::int64_t r0, std::int64_t seq,
                             int warp, int lane, const Value& value) {
  flash_for_each_acc<HD>([&](int nt, int r) {
    const FlashElem e = flash_acc_element(lane, nt, r);
    const std::int64_t row = r0 + warp * 16 + e.row;
    if (row < seq) dst[row * stride + e.col] = store<T>(value(nt, r));
  });
}

// Runs f(masked) with masked a compile-time bool: false when the caller
// knows that no element of a warp's tile is masked (inside T and on the
// visible side of the diagonal, most tiles of a causal walk), so those
// skip the per-element comparisons; the result is the same either way.
template <class F>
ZRT_HD void flash_with_mask(bool any_masked, const F& f) {
  if (any_masked)
    f(std::true_type{});
  else
    f(std::false_type{});
}

// --- forward ------------------------------------------------------------------

// One query tile's block: out and lse of rows [qt·64, qt·64 + 64).
// `Lane` state lives in the Warps policy (registers on the GPU).
template <class T, int HD, class Block, class Warps>
ZRT_HD void flash_forward_block(const Block& blk, Warps& warps, const AttentionDims& d,
                                std::int64_t pair, std::int64_t qt, const T* qkv, T* out,
                                float* lse, T* smem) {
  const FlashPair pr(d, pair);
  const int ld = flash_ld(HD);
  T* q_tile = smem;
  T* k_tile = q_tile + kFlashRows * ld;
  T* v_tile = k_tile + kFlashRows * ld;
  const std::int64_t q0 = qt * kFlashRows, qn = attention_tile_len(q0, kFlashRows, d.seq);
  const T* base = qkv + pr.base_off;
  flash_load_tile(blk, q_tile, HD, base, pr.s3, q0, qn);
  warps.for_each_lane([&](int, int, auto& ln) {
    flash_for_each_acc<HD>([&](int nt, int r) { ln.o[nt][r] = 0.0f; });
    ZRT_FLASH_UNROLL
    for (int x = 0; x < 2; ++x) ln.st.m[x] = -INFINITY, ln.st.l[x] = 0.0f;
  });
  const std::int64_t last_kt = (q0 + qn - 1) / kFlashCols;
  for (std::int64_t kt = 0; kt <= last_kt; ++kt) {
    const std::int64_t k0 = kt * kFlashCols, kn = attention_tile_len(k0, kFlashCols, d.seq);
    blk.sync();  // the last tile's readers are done
    flash_load_kv_tile(blk, k_tile, v_tile, HD, base, pr, k0, kn);
    blk.sync();
    warps.for_each_warp([&](const auto& w, int warp, auto* lanes) {
      using W = std::remove_cv_t<std::remove_reference_t<decltype(w)>>;
      FlashTile16x64 s[W::kLanes];
      flash_warp_qk<T, HD>(w, s, q_tile, warp * 16, k_tile);
      // Mask, scale, the rows' new maxima. The warp's queries start at qw;
      // a tile whose last key is at or before qw, inside T, is all visible.
      float mx[W::kLanes][2];
      const std::int64_t qw = q0 + warp * 16;
      flash_with_mask(k0 + kFlashCols - 1 > qw || k0 + kFlashCols > d.seq, [&](auto masked) {
        for (int i = 0; i < W::kLanes; ++i) {
          mx[i][0] = mx[i][1] = -INFINITY;
          ZRT_FLASH_UNROLL
          for (int nt = 0; nt < 8; ++nt) ZRT_FLASH_UNROLL
          for (int r = 0; r < 4; ++r) {
            float& x = s[i].acc[nt][r];
            if constexpr (decltype(masked)::value) {
              const FlashElem e = flash_acc_element(w.lane(i), nt, r);
              const std::int64_t q = qw + e.row, k = k0 + e.col;
              x = k <= q && k < d.seq ? x * pr.scale : -INFINITY;
            } else {
              x *= pr.scale;
            }
            float& m = mx[i][r >> 1];
            m = x > m ? x : m;
          }
        }
      });
      ZRT_FLASH_UNROLL
      for (int x = 0; x < 2; ++x) w.quad_max([&](int i) { return &mx[i][x]; });
      // Rescale the running sums and outputs; probabilities in place.
      float sum[W::kLanes][2];
      for (int i = 0; i < W::kLanes; ++i) {
        auto& ln = lanes[i];
        float alpha[2];
        ZRT_FLASH_UNROLL
        for (int x = 0; x < 2; ++x) {
          const float m_new = ln.st.m[x] > mx[i][x] ? ln.st.m[x] : mx[i][x];
          // A row with every key masked so far keeps 0s, not exp(-inf - -inf)
          // (a guard: a causal walk's first tile gives each row key 0).
          const float m_use = m_new == -INFINITY ? 0.0f : m_new;
          alpha[x] = exp_(ln.st.m[x] - m_use);
          ln.st.m[x] = m_new;
          mx[i][x] = m_use;
          sum[i][x] = 0.0f;
        }
        ZRT_FLASH_UNROLL
        for (int nt = 0; nt < 8; ++nt) ZRT_FLASH_UNROLL
        for (int r = 0; r < 4; ++r) {
          float& x = s[i].acc[nt][r];
          x = exp_(x - mx[i][r >> 1]);
          sum[i][r >> 1] += x;
        }
        ZRT_FLASH_UNROLL
        for (int nt = 0; nt < HD / 8; ++nt) ZRT_FLASH_UNROLL
        for (int r = 0; r < 4; ++r) ln.o[nt][r] *= alpha[r >> 1];
        ZRT_FLASH_UNROLL
        for (int x = 0; x < 2; ++x) ln.st.l[x] *= alpha[x];
      }
      ZRT_FLASH_UNROLL
      for (int x = 0; x < 2; ++x) w.quad_sum([&](int i) { return &sum[i][x]; });
      for (int i = 0; i < W::kLanes; ++i) ZRT_FLASH_UNROLL
      for (int x = 0; x < 2; ++x) lanes[i].st.l[x] += sum[i][x];
      flash_warp_pv<T, HD>(
          w, [&](int i) { return s[i].acc; }, v_tile, [&](int i) { return lanes[i].o; });
    });
  }
  // O / l and lse for the rows inside T.
  warps.for_each_lane([&](int warp, int lane, auto& ln) {
    flash_store_rows<T, HD>(out + pr.obase_off, pr.c, q0, d.seq, warp, lane,
                            [&](int nt, int r) { return ln.o[nt][r] / ln.st.l[r >> 1]; });
    if ((lane & 3) != 0) return;
    ZRT_FLASH_UNROLL
    for (int x = 0; x < 2; ++x) {
      const std::int64_t q = q0 + warp * 16 + (lane >> 2) + 8 * x;
      if (q < d.seq) lse[pr.lse_off + q] = ln.st.m[x] + log_(ln.st.l[x]);
    }
  });
}

// --- backward -----------------------------------------------------------------

template <int HD>
struct FlashKeyLane {
  float dk[std::size_t{HD / 8}][4], dv[std::size_t{HD / 8}][4];
};

template <int HD>
struct FlashQueryLane {
  float dq[std::size_t{HD / 8}][4];
};

// The backward's tiles: the block's own rows (K and V, or Q and dO) and the
// walked side's, with the walked rows' lse and D.
template <class T>
struct FlashBackwardSmem {
  T *own_a, *own_b, *walk_a, *walk_b;
  float *lse, *dsum;
  ZRT_HD FlashBackwardSmem(T* smem, int hd) {
    const int tile = kFlashRows * flash_ld(hd);
    own_a = smem, own_b = smem + tile, walk_a = smem + 2 * tile, walk_b = smem + 3 * tile;
    lse = reinterpret_cast<float*>(smem + 4 * tile);
    dsum = lse + kFlashRows;
  }
};

// The operands of the backward (lse and D float).
template <class T>
using FlashBackwardArgs = AttentionBackwardArgs<T, float>;

// Rows [q0, q0 + qn) of a pair's queries and output gradients into q_tile
// and do_tile, and the rows' lse and D into sm, zeros past qn.
// HD is the head size as a constant, so the tile's index arithmetic is.
template <int HD, class T, class Block>
ZRT_HD void flash_load_query_tile(const Block& blk, const FlashBackwardArgs<T>& a,
                                  const FlashPair& pr, const FlashBackwardSmem<T>& sm, T* q_tile,
                                  T* do_tile, std::int64_t q0, std::int64_t qn) {
  flash_load_tile(blk, q_tile, HD, a.qkv + pr.base_off, pr.s3, q0, qn);
  flash_load_tile(blk, do_tile, HD, a.dout + pr.obase_off, pr.c, q0, qn);
  blk.for_each(kFlashRows, [&](int r) {
    sm.lse[r] = r < qn ? a.lse[pr.lse_off + q0 + r] : 0.0f;
    sm.dsum[r] = r < qn ? a.dsum[pr.lse_off + q0 + r] : 0.0f;
  });
}

// A key tile's block: dK and dV of keys [kt·64, kt·64 + 64) over the query
// tiles from kt on (queries before the keys see none of them).
template <class T, int HD, class Block, class Warps>
ZRT_HD void flash_backward_kv_block(const Block& blk, Warps& warps, const FlashBackwardArgs<T>& a,
                                    std::int64_t pair, std::int64_t kt, T* smem) {
  const AttentionDims& d = a.d;
  const FlashPair pr(d, pair);
  const FlashBackwardSmem<T> sm(smem, HD);
  const std::int64_t k0 = kt * kFlashCols, kn = attention_tile_len(k0, kFlashCols, d.seq);
  flash_load_kv_tile(blk, sm.own_a, sm.own_b, HD, a.qkv + pr.base_off, pr, k0, kn);
  warps.for_each_lane([&](int, int, auto& ln) {
    flash_for_each_acc<HD>([&](int nt, int r) { ln.dk[nt][r] = ln.dv[nt][r] = 0.0f; });
  });
  const std::int64_t q_tiles = (d.seq + kFlashRows - 1) / kFlashRows;
  for (std::int64_t qt = kt; qt < q_tiles; ++qt) {
    const std::int64_t q0 = qt * kFlashRows, qn = attention_tile_len(q0, kFlashRows, d.seq);
    blk.sync();
    flash_load_query_tile<HD>(blk, a, pr, sm, sm.walk_a, sm.walk_b, q0, qn);
    blk.sync();
    warps.for_each_warp([&](const auto& w, int warp, auto* lanes) {
      using W = std::remove_cv_t<std::remove_reference_t<decltype(w)>>;
      FlashTile16x64 p[W::kLanes], dp[W::kLanes];
      flash_warp_qk<T, HD>(w, p, sm.own_a, warp * 16, sm.walk_a);  // Sᵀ = K·Qᵀ
      // The warp's keys start at kw; the walked queries are all visible to
      // them when the first is at or after kw's last, all inside T.
      const std::int64_t kw = k0 + warp * 16;
      flash_with_mask(q0 < kw + 15 || q0 + kFlashRows > d.seq || kw + 16 > d.seq, [&](auto masked) {
        for (int i = 0; i < W::kLanes; ++i) ZRT_FLASH_UNROLL
        for (int nt = 0; nt < 8; ++nt) ZRT_FLASH_UNROLL
        for (int r = 0; r < 4; ++r) {
          const FlashElem e = flash_acc_element(w.lane(i), nt, r);
          float& x = p[i].acc[nt][r];
          bool visible = true;
          if constexpr (decltype(masked)::value) {
            const std::int64_t k = kw + e.row, q = q0 + e.col;
            visible = q >= k && q < d.seq && k < d.seq;
          }
          x = visible ? exp_(x * pr.scale - sm.lse[e.col]) : 0.0f;
        }
      });
      flash_warp_pv<T, HD>(
          w, [&](int i) { return p[i].acc; }, sm.walk_b,
          [&](int i) { return lanes[i].dv; });                      // dV += Pᵀ·dO
      flash_warp_qk<T, HD>(w, dp, sm.own_b, warp * 16, sm.walk_b);  // dPᵀ = V·dOᵀ
      for (int i = 0; i < W::kLanes; ++i) ZRT_FLASH_UNROLL
      for (int nt = 0; nt < 8; ++nt) ZRT_FLASH_UNROLL
      for (int r = 0; r < 4; ++r) {
        const FlashElem e = flash_acc_element(w.lane(i), nt, r);
        dp[i].acc[nt][r] = p[i].acc[nt][r] * (dp[i].acc[nt][r] - sm.dsum[e.col]);
      }
      flash_warp_pv<T, HD>(
          w, [&](int i) { return dp[i].acc; }, sm.walk_a,
          [&](int i) { return lanes[i].dk; });  // dK += dSᵀ·Q
    });
  }
  T* dk = a.dqkv + pr.base_off + pr.c;
  warps.for_each_lane([&](int warp, int lane, auto& ln) {
    flash_store_rows<T, HD>(dk, pr.s3, k0, d.seq, warp, lane,
                            [&](int nt, int r) { return ln.dk[nt][r] * pr.scale; });
    flash_store_rows<T, HD>(dk + pr.c, pr.s3, k0, d.seq, warp, lane,
                            [&](int nt, int r) { return ln.dv[nt][r]; });
  });
}

// A query tile's block: dQ of queries [qt·64, qt·64 + 64) over key tiles
// 0..qt.
template <class T, int HD, class Block, class Warps>
ZRT_HD void flash_backward_q_block(const Block& blk, Warps& warps, const FlashBackwardArgs<T>& a,
                                   std::int64_t pair, std::int64_t qt, T* smem) {
  const AttentionDims& d = a.d;
  const FlashPair pr(d, pair);
  const FlashBackwardSmem<T> sm(smem, HD);
  const std::int64_t q0 = qt * kFlashRows, qn = attention_tile_len(q0, kFlashRows, d.seq);
  flash_load_query_tile<HD>(blk, a, pr, sm, sm.own_a, sm.own_b, q0, qn);
  warps.for_each_lane([&](int, int, auto& ln) {
    flash_for_each_acc<HD>([&](int nt, int r) { ln.dq[nt][r] = 0.0f; });
  });
  for (std::int64_t kt = 0; kt <= qt; ++kt) {
    const std::int64_t k0 = kt * kFlashCols, kn = attention_tile_len(k0, kFlashCols, d.seq);
    blk.sync();
    flash_load_kv_tile(blk, sm.walk_a, sm.walk_b, HD, a.qkv + pr.base_off, pr, k0, kn);
    blk.sync();
    warps.for_each_warp([&](const auto& w, int warp, auto* lanes) {
      using W = std::remove_cv_t<std::remove_reference_t<decltype(w)>>;
      FlashTile16x64 p[W::kLanes], dp[W::kLanes];
      flash_warp_qk<T, HD>(w, p, sm.own_a, warp * 16, sm.walk_a);   // S = Q·Kᵀ
      flash_warp_qk<T, HD>(w, dp, sm.own_b, warp * 16, sm.walk_b);  // dP = dO·Vᵀ
      // The warp's queries start at qw: a key tile whose last key is at or
      // before qw, with keys and queries inside T, is all visible.
      const std::int64_t qw = q0 + warp * 16;
      flash_with_mask(
          k0 + kFlashCols - 1 > qw || k0 + kFlashCols > d.seq || qw + 16 > d.seq, [&](auto masked) {
            for (int i = 0; i < W::kLanes; ++i) ZRT_FLASH_UNROLL
            for (int nt = 0; nt < 8; ++nt) ZRT_FLASH_UNROLL
            for (int r = 0; r < 4; ++r) {
              const FlashElem e = flash_acc_element(w.lane(i), nt, r);
              const int row = warp * 16 + e.row;
              bool visible = true;
              if constexpr (decltype(masked)::value) {
                const std::int64_t q = qw + e.row, k = k0 + e.col;
                visible = k <= q && k < d.seq && q < d.seq;
              }
              const float pv = visible ? exp_(p[i].acc[nt][r] * pr.scale - sm.lse[row]) : 0.0f;
              dp[i].acc[nt][r] = pv * (dp[i].acc[nt][r] - sm.dsum[row]);
            }
          });
      flash_warp_pv<T, HD>(
          w, [&](int i) { return dp[i].acc; }, sm.walk_a,
          [&](int i) { return lanes[i].dq; });  // dQ += dS·K
    });
  }
  warps.for_each_lane([&](int warp, int lane, auto& ln) {
    flash_store_rows<T, HD>(a.dqkv + pr.base_off, pr.s3, q0, d.seq, warp, lane,
                            [&](int nt, int r) { return ln.dq[nt][r] * pr.scale; });
  });
}

// --- the host emulation -------------------------------------------------------

struct FlashHostBlock {
  bool vec = false;  // tiles in 16-byte vectors (flash_vector_tiles)
  template <class F>
  void for_each(int n, const F& f) const {
    for (int i = 0; i < n; ++i) f(i);
  }
  void sync() const {}
};

// kFlashWarps warps of 32 lanes, each lane's state a `Lane`.
template <class Lane>
struct FlashHostWarps {
  Lane lanes[kFlashWarps][32];
  template <class F>
  void for_each_lane(const F& f) {
    for (int w = 0; w < kFlashWarps; ++w)
      for (int l = 0; l < 32; ++l) f(w, l, lanes[w][l]);
  }
  template <class F>
  void for_each_warp(const F& f) {
    for (int w = 0; w < kFlashWarps; ++w) f(FlashHostWarp{}, w, lanes[w]);
  }
};

// Shared memory of the host blocks, poisoned with NaN so a read of an
// element no block wrote shows.
template <class T>
std::vector<T> flash_host_smem(std::int64_t elements) {
  return std::vector<T>(static_cast<std::size_t>(elements), store<T>(NAN));
}

// vectors: the tiles in 16-byte vectors (the GPU's choice where
// flash_vector_tiles holds), else element by element.
template <class T, int HD>
void flash_attention_forward_host(const AttentionDims& d, const T* qkv, T* out, float* lse,
                                  bool vectors) {
  const FlashHostBlock blk{vectors && flash_vector_tiles(qkv, qkv)};
  std::vector<T> smem = flash_host_smem<T>(flash_forward_smem(HD));
  const std::int64_t tiles = (d.seq + kFlashRows - 1) / kFlashRows;
  for (std::int64_t pair = 0; pair < d.batch * d.heads; ++pair)
    for (std::int64_t qt = 0; qt < tiles; ++qt) {
      FlashHostWarps<FlashForwardLane<HD>> warps;
      flash_forward_block<T, HD>(blk, warps, d, pair, qt, qkv, out, lse, smem.data());
    }
}

template <class T, int HD>
void flash_attention_backward_host(const AttentionDims& d, const T* dout, const T* qkv,
                                   const T* out, const float* lse, T* dqkv, bool vectors) {
  std::vector<float> dsum(static_cast<std::size_t>(d.batch * d.heads * d.seq));
  for (std::size_t r = 0; r < dsum.size(); ++r)
    dsum[r] = attention_row_dsum<T, float>(d, std::int64_t(r), dout, out);
  std::vector<T> smem = flash_host_smem<T>(flash_backward_smem(HD));
  const FlashHostBlock blk{vectors && flash_vector_tiles(qkv, dout)};
  const FlashBackwardArgs<T> a(d, dout, qkv, out, lse, dsum.data(), dqkv);
  const std::int64_t tiles = (d.seq + kFlashRows - 1) / kFlashRows;
  for (std::int64_t pair = 0; pair < d.batch * d.heads; ++pair)
    for (std::int64_t t = 0; t < tiles; ++t) {
      FlashHostWarps<FlashKeyLane<HD>> kv;
      flash_backward_kv_block<T, HD>(blk, kv, a, pair, t, smem.data());
      FlashHostWarps<FlashQueryLane<HD>> q;
      flash_backward_q_block<T, HD>(blk, q, a, pair, t, smem.data());
    }
}

}  // namespace zrt::kernels
