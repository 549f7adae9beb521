#include "zrt/kernels/dispatch.h"
#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/ops/adamw.cuh"

namespace zrt::kernels::cuda {
namespace {

template <class G, class L>
struct AdamWBody {
  float* p;
  float* m;
  float* v;
  const G* g;
  L* out;
  float decay;
  AdamWCoefficients c;
  static constexpr bool kOut = !std::is_same_v<L, NoParamOut>;
  // The packed arrays: param, moments and gradient, and the parameter copy
  // when written (Out stands in for it otherwise, adding nothing).
  using Out = std::conditional_t<kOut, L, float>;
  static constexpr int kLen = kPackLen<float, G, Out>;
  __device__ void operator()(std::int64_t i) const { adamw_element_at(p, m, v, g, out, i, decay, c); }
  // adamw_element_at on kLen elements at once: the same loads, arithmetic
  // and stores, in packs.
  __device__ void pack(std::int64_t q) const {
    Pack<float, kLen> pp = pack_at<kLen>(p, q), pm = pack_at<kLen>(m, q), pv = pack_at<kLen>(v, q);
    const Pack<G, kLen> pg = pack_at<kLen>(g, q);
    Pack<Out, kLen> po;
#pragma unroll
    for (int j = 0; j < kLen; ++j) {
      adamw_element(pp.v[j], pm.v[j], pv.v[j], pg.v[j], decay, c);
      if constexpr (kOut) po.v[j] = from_f32<L>(pp.v[j]);
    }
    pack_at<kLen>(p, q) = pp;
    pack_at<kLen>(m, q) = pm;
    pack_at<kLen>(v, q) = pv;
    if constexpr (kOut) pack_at<kLen>(out, q) = po;
  }
};

template <class G, class L>
void run_pieces(float* p, float* m, float* v, const G* g, L* out, std::span<const AdamWPiece> pieces,
                const AdamWCoefficients& c, bool simple, cudaStream_t stream) {
  using Body = AdamWBody<G, L>;
  for (const AdamWPiece& piece : pieces) {
    const std::int64_t b = piece.begin;
    L* out_b = nullptr;
    if constexpr (Body::kOut) out_b = out + b;
    const Body body{p + b, m + b, v + b, g + b, out_b, piece.decayed ? c.decay : 1.0f, c};
    bool packed = !simple && pack_aligned(body.p, body.m, body.v, body.g);
    if constexpr (Body::kOut) packed = packed && pack_aligned(out_b);
    if (packed) for_each_pack_of<Body::kLen>(piece.end - b, body, stream);
    else for_each_index(piece.end - b, body, stream);
  }
}

}  // namespace

void launch_adamw(float* param, float* exp_avg, float* exp_avg_sq, const void* grad,
                  DType grad_dtype, void* param_out, DType param_out_dtype,
                  std::span<const AdamWPiece> pieces, const AdamWCoefficients& coefficients,
                  bool simple, cudaStream_t stream) {
  dispatch<StorageFloats>(grad_dtype, "fused_adamw", [&](auto gt) {
    using G = typename decltype(gt)::type;
    const G* g = static_cast<const G*>(grad);
    if (!param_out)
      return run_pieces<G, NoParamOut>(param, exp_avg, exp_avg_sq, g, nullptr, pieces, coefficients, simple, stream);
    dispatch<StorageFloats>(param_out_dtype, "fused_adamw", [&](auto lt) {
      using L = typename decltype(lt)::type;
      run_pieces<G, L>(param, exp_avg, exp_avg_sq, g, static_cast<L*>(param_out), pieces, coefficients,
                       simple, stream);
    });
  });
}

}  // namespace zrt::kernels::cuda
