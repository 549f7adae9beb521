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
  __device__ void operator()(std::int64_t i) const { adamw_element_at(p, m, v, g, out, i, decay, c); }
};

template <class G, class L>
void run_pieces(float* p, float* m, float* v, const G* g, L* out, std::span<const AdamWPiece> pieces,
                const AdamWCoefficients& c, cudaStream_t stream) {
  for (const AdamWPiece& piece : pieces) {
    const std::int64_t b = piece.begin;
    L* out_b = nullptr;
    if constexpr (!std::is_same_v<L, NoParamOut>) out_b = out + b;
    for_each_index(piece.end - b,
                   AdamWBody<G, L>{p + b, m + b, v + b, g + b, out_b, piece.decayed ? c.decay : 1.0f, c},
                   stream);
  }
}

}  // namespace

void launch_adamw(float* param, float* exp_avg, float* exp_avg_sq, const void* grad,
                  DType grad_dtype, void* param_out, DType param_out_dtype,
                  std::span<const AdamWPiece> pieces, const AdamWCoefficients& coefficients,
                  cudaStream_t stream) {
  dispatch<StorageFloats>(grad_dtype, "fused_adamw", [&](auto gt) {
    using G = typename decltype(gt)::type;
    const G* g = static_cast<const G*>(grad);
    if (!param_out)
      return run_pieces<G, NoParamOut>(param, exp_avg, exp_avg_sq, g, nullptr, pieces, coefficients, stream);
    dispatch<StorageFloats>(param_out_dtype, "fused_adamw", [&](auto lt) {
      using L = typename decltype(lt)::type;
      run_pieces<G, L>(param, exp_avg, exp_avg_sq, g, static_cast<L*>(param_out), pieces, coefficients,
                       stream);
    });
  });
}

}  // namespace zrt::kernels::cuda
