#include "zrt/kernels/dispatch.h"
#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/ops/adamw.cuh"

namespace zrt::kernels::cuda {
namespace {

// Note [One AdamW launch over the pieces]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A shard's decayed and undecayed pieces (weights against biases and norms)
// alternate every few thousand elements, so a launch per piece meant dozens
// of small launches per unit, each starting at an offset that broke the
// 16-byte packs. Where the pieces fit kAdamWTablePieces, one launch covers
// the whole shard in packs from element 0 and each pack looks its decay up
// in the piece table it carries (a binary search over the pieces' ends;
// a pack that straddles a boundary looks up each element). The arithmetic
// per element is unchanged, so the results are the same bits.
constexpr int kAdamWTablePieces = 64;

struct AdamWPieceTable {
  int count = 0;
  std::int64_t end[kAdamWTablePieces];  // exclusive, ascending; the last is n
  bool decayed[kAdamWTablePieces];
  // The piece holding element i (i < n).
  __device__ int piece_of(std::int64_t i) const {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (i < end[mid])
        hi = mid;
      else
        lo = mid + 1;
    }
    return lo;
  }
};

// The decay of element i: through the table, or the piece's own.
struct PieceDecay {
  float decay;  // a single piece's (table.count == 0)
  AdamWPieceTable table;
  float decayed_factor;
  __device__ float at(std::int64_t i) const {
    if (table.count == 0) return decay;
    return table.decayed[table.piece_of(i)] ? decayed_factor : 1.0f;
  }
  // The decay of elements [i, i + len): one lookup when they share a piece.
  template <int kLen>
  __device__ void pack(std::int64_t i, float (&out)[kLen]) const {
    if (table.count == 0) {
      for (int j = 0; j < kLen; ++j) out[j] = decay;
      return;
    }
    const int k = table.piece_of(i);
    if (i + kLen <= table.end[k]) {
      const float d = table.decayed[k] ? decayed_factor : 1.0f;
      for (int j = 0; j < kLen; ++j) out[j] = d;
      return;
    }
    for (int j = 0; j < kLen; ++j) out[j] = at(i + j);
  }
};

template <class G, class L, class M>
struct AdamWBody {
  float* p;
  M* m;
  M* v;
  const G* g;
  L* out;
  PieceDecay decay;
  AdamWCoefficients c;
  MomentRoundingKey key;
  static constexpr bool kOut = !std::is_same_v<L, NoParamOut>;
  // The packed arrays: param, moments and gradient, and the parameter copy
  // when written (Out stands in for it otherwise, adding nothing).
  using Out = std::conditional_t<kOut, L, float>;
  static constexpr int kLen = kPackLen<float, M, G, Out>;
  __device__ void operator()(std::int64_t i) const {
    std::uint32_t bits = 0;
    if constexpr (kRoundedMoments<M>) bits = MomentNoise(key).at(i);
    adamw_element_at(p, m, v, g, out, i, decay.at(i), c, bits);
  }
  // adamw_element_at on kLen elements at once: the same loads, arithmetic
  // and stores, in packs.
  __device__ void pack(std::int64_t q) const {
    Pack<float, kLen> pp = pack_at<kLen>(p, q);
    Pack<M, kLen> pm = pack_at<kLen>(m, q), pv = pack_at<kLen>(v, q);
    const Pack<G, kLen> pg = pack_at<kLen>(g, q);
    Pack<Out, kLen> po;
    float d[kLen];
    decay.template pack<kLen>(q * kLen, d);
    MomentNoise noise(key);  // two Philox calls per pack of eight, three if unaligned
#pragma unroll
    for (int j = 0; j < kLen; ++j) {
      float mj = to_f32(pm.v[j]), vj = to_f32(pv.v[j]);
      adamw_element(pp.v[j], mj, vj, pg.v[j], d[j], c);
      std::uint32_t bits = 0;
      if constexpr (kRoundedMoments<M>) bits = noise.at(q * kLen + j);
      store_moments(pm.v[j], pv.v[j], mj, vj, bits);
      if constexpr (kOut) po.v[j] = from_f32<L>(pp.v[j]);
    }
    pack_at<kLen>(p, q) = pp;
    pack_at<kLen>(m, q) = pm;
    pack_at<kLen>(v, q) = pv;
    if constexpr (kOut) pack_at<kLen>(out, q) = po;
  }
};

// Elements [b, e) with `decay` on `stream`, in packs where aligned.
template <class G, class L, class M>
void run_range(float* p, M* m, M* v, const G* g, L* out, std::int64_t b, std::int64_t e,
               const PieceDecay& decay, const AdamWCoefficients& c, MomentRoundingKey key,
               bool simple, cudaStream_t stream) {
  using Body = AdamWBody<G, L, M>;
  L* out_b = nullptr;
  if constexpr (Body::kOut) out_b = out + b;
  key.first_index += static_cast<std::uint64_t>(b);  // the body's element 0 is b
  const Body body{p + b, m + b, v + b, g + b, out_b, decay, c, key};
  bool packed = !simple && pack_aligned(body.p, body.m, body.v, body.g);
  if constexpr (Body::kOut) packed = packed && pack_aligned(out_b);
  if (packed)
    for_each_pack_of<Body::kLen>(e - b, body, stream);
  else
    for_each_index(e - b, body, stream);
}

template <class G, class L, class M>
void run_pieces(float* p, M* m, M* v, const G* g, L* out, std::span<const AdamWPiece> pieces,
                const AdamWCoefficients& c, const MomentRoundingKey& key, bool simple,
                cudaStream_t stream) {
  if (pieces.empty()) return;
  // One launch (Note [One AdamW launch over the pieces]); the simple
  // version, and a shard of more pieces than the table holds, a launch each.
  if (!simple && pieces.size() > 1 && pieces.size() <= std::size_t(kAdamWTablePieces)) {
    PieceDecay all{1.0f, {}, c.decay};
    all.table.count = int(pieces.size());
    for (std::size_t k = 0; k < pieces.size(); ++k) {
      all.table.end[k] = pieces[k].end;
      all.table.decayed[k] = pieces[k].decayed;
    }
    // The table's ends are shard offsets: the launch starts at element 0,
    // where make_pieces' first piece begins.
    return run_range(p, m, v, g, out, 0, pieces.back().end, all, c, key, false, stream);
  }
  for (const AdamWPiece& piece : pieces) {
    const PieceDecay one{piece.decayed ? c.decay : 1.0f, {}, c.decay};
    run_range(p, m, v, g, out, piece.begin, piece.end, one, c, key, simple, stream);
  }
}

}  // namespace

void launch_adamw(float* param, void* exp_avg, void* exp_avg_sq, DType moment_dtype,
                  const void* grad, DType grad_dtype, void* param_out, DType param_out_dtype,
                  std::span<const AdamWPiece> pieces, const AdamWCoefficients& coefficients,
                  const MomentRoundingKey& key, bool simple, cudaStream_t stream) {
  auto with_moments = [&](auto* m, auto* v) {
    dispatch<StorageFloats>(grad_dtype, "fused_adamw", [&](auto gt) {
      using G = typename decltype(gt)::type;
      const G* g = static_cast<const G*>(grad);
      if (!param_out)
        return run_pieces<G, NoParamOut>(param, m, v, g, nullptr, pieces, coefficients, key, simple,
                                         stream);
      dispatch<StorageFloats>(param_out_dtype, "fused_adamw", [&](auto lt) {
        using L = typename decltype(lt)::type;
        run_pieces<G, L>(param, m, v, g, static_cast<L*>(param_out), pieces, coefficients, key,
                         simple, stream);
      });
    });
  };
  if (moment_dtype == DType::bf16)
    with_moments(static_cast<bf16*>(exp_avg), static_cast<bf16*>(exp_avg_sq));
  else
    with_moments(static_cast<float*>(exp_avg), static_cast<float*>(exp_avg_sq));
}

}  // namespace zrt::kernels::cuda
