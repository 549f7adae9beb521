#include "zrt/kernels/ops/adamw.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/dispatch.h"
#include "zrt/kernels/kernel_path.h"
#include "zrt/kernels/launch.h"
#include "zrt/kernels/ops/adamw_math.h"
#include "zrt/kernels/ops/cpu_clones.h"
#include "zrt/kernels/ops/op_checks.h"
#ifdef ZRT_WITH_CUDA
#include "zrt/kernels/ops/adamw.cuh"
#endif

namespace zrt::kernels {
namespace {

constexpr const char* kOp = "fused_adamw";

// See Note [AdamW order of operations]: scalars in double, rounded once.
AdamWCoefficients coefficients(const AdamWHyperparams& hp, std::int64_t step, double grad_scale) {
  const double t = static_cast<double>(step);
  const double bias_correction1 = 1.0 - std::pow(hp.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(hp.beta2, t);
  AdamWCoefficients c;
  c.decay = static_cast<float>(1.0 - hp.lr * hp.weight_decay);
  c.beta1 = static_cast<float>(hp.beta1);
  c.one_minus_beta1 = static_cast<float>(1.0 - hp.beta1);
  c.beta2 = static_cast<float>(hp.beta2);
  c.one_minus_beta2 = static_cast<float>(1.0 - hp.beta2);
  c.neg_step_size = static_cast<float>(-(hp.lr / bias_correction1));
  c.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  c.eps = static_cast<float>(hp.eps);
  c.grad_scale = static_cast<float>(grad_scale);
  return c;
}

// Tiles [0, n) with pieces alternating between decayed and not.
std::vector<AdamWPiece> make_pieces(std::int64_t n, std::span<const ElementRange> decay_ranges) {
  std::vector<AdamWPiece> pieces;
  std::int64_t pos = 0;
  for (std::size_t k = 0; k < decay_ranges.size(); ++k) {
    const ElementRange r = decay_ranges[k];
    ZRT_CHECK_ARG(r.begin >= pos && r.begin <= r.end && r.end <= n, kOp, ": decay range ", k, " [",
                  r.begin, ", ", r.end, ") is not sorted, disjoint and inside the shard of ", n,
                  " elements");
    if (r.begin > pos) pieces.push_back({pos, r.begin, false});
    if (r.end > r.begin) pieces.push_back({r.begin, r.end, true});
    pos = r.end;
  }
  if (n > pos) pieces.push_back({pos, n, false});
  return pieces;
}

// One thread's chunk [b, e) of the CPU twin, walking the pieces it overlaps;
// a function of its own so that it is cloned per vector ISA (Note [CPU
// vector clones]) and sees non-aliased pointers. With bf16 moments each
// block's bits are drawn first, a Philox call per four elements in a loop
// over the counters alone, so that both that loop and the one over the
// elements vectorise: the arithmetic, not memory, bounds this loop, and the
// AVX-512 clone runs it 2.3x faster than SSE2 (Note [bf16 AdamW moments]).
constexpr std::int64_t kNoiseBlock = 512;

template <class G, class L, class M>
ZRT_CPU_CLONES void adamw_chunk(float* __restrict p, M* __restrict m, M* __restrict v,
                                const G* __restrict g, L* __restrict out, std::int64_t b,
                                std::int64_t e, const AdamWPiece* pieces, std::size_t piece_count,
                                const AdamWCoefficients c, const MomentRoundingKey key) {
  // The words of the counters a block touches: element k of a block
  // starting at flat index j takes words[j % 4 + k].
  alignas(64) std::uint32_t words[kNoiseBlock + 8];
  const AdamWPiece* it =
      std::upper_bound(pieces, pieces + piece_count, b,
                       [](std::int64_t x, const AdamWPiece& piece) { return x < piece.end; });
  for (; it != pieces + piece_count && it->begin < e; ++it) {
    const float decay = it->decayed ? c.decay : 1.0f;
    const std::int64_t begin = std::max(b, it->begin), end = std::min(e, it->end);
    if constexpr (!kRoundedMoments<M>) {
      for (std::int64_t i = begin; i < end; ++i) adamw_element_at(p, m, v, g, out, i, decay, c, 0u);
      continue;
    }
    for (std::int64_t i = begin; i < end; i += kNoiseBlock) {
      const std::int64_t len = std::min(kNoiseBlock, end - i);
      const std::uint64_t j = key.first_index + static_cast<std::uint64_t>(i);
      const std::uint64_t q0 = j >> 2, counters = ((j + len - 1) >> 2) - q0 + 1;
      for (std::uint64_t q = 0; q < counters; ++q) {
        const PhiloxWords w = key.words(q0 + q);
        for (int x = 0; x < 4; ++x) words[4 * q + x] = w.x[x];
      }
      const std::uint32_t* bits = words + (j & 3);
      for (std::int64_t k = 0; k < len; ++k)
        adamw_element_at(p, m, v, g, out, i + k, decay, c, bits[k]);
    }
  }
}

// CPU twin: one pass over the shard split across threads.
template <class G, class L, class M>
void adamw_cpu(float* p, M* m, M* v, const G* g, L* out, std::int64_t n,
               const std::vector<AdamWPiece>& pieces, const AdamWCoefficients c,
               const MomentRoundingKey key) {
  parallel_for(n, 1024, [&](std::int64_t b, std::int64_t e) {
    adamw_chunk(p, m, v, g, out, b, e, pieces.data(), pieces.size(), c, key);
  });
}

MomentRoundingKey rounding_key(const AdamWRounding& r, std::int64_t step) {
  MomentRoundingKey key;
  key.seed_lo = static_cast<std::uint32_t>(r.seed);
  key.seed_hi = static_cast<std::uint32_t>(r.seed >> 32);
  key.step = static_cast<std::uint32_t>(step);
  key.stream = static_cast<std::uint32_t>(r.stream) ^ static_cast<std::uint32_t>(r.stream >> 32);
  key.first_index = static_cast<std::uint64_t>(r.first_index);
  return key;
}

}  // namespace

void check_adamw_hyperparams(const AdamWHyperparams& hp) {
  auto finite_non_negative = [](const char* name, double x) {
    ZRT_CHECK_ARG(std::isfinite(x) && x >= 0, "AdamW ", name, " must be finite and >= 0 (got ", x,
                  ")");
  };
  auto unit_interval = [](const char* name, double x) {
    ZRT_CHECK_ARG(x >= 0 && x < 1, "AdamW ", name, " must be in [0, 1) (got ", x, ")");
  };
  finite_non_negative("lr", hp.lr);
  unit_interval("beta1", hp.beta1);
  unit_interval("beta2", hp.beta2);
  // eps = 0 divides 0 by 0 wherever a gradient is always zero (an unused
  // position): m = v = 0 gives NaN weights behind normal-looking losses.
  ZRT_CHECK_ARG(std::isfinite(hp.eps) && hp.eps > 0, "AdamW eps must be finite and > 0 (got ",
                hp.eps, ")");
  finite_non_negative("weight_decay", hp.weight_decay);
}

void fused_adamw(const Tensor& param, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const Tensor& grad, std::int64_t step, const AdamWHyperparams& hp,
                 std::span<const ElementRange> decay_ranges, const AdamWStepOptions& options,
                 Stream stream) {
  const Device device = check_operands(kOp, {param, exp_avg, exp_avg_sq, grad}, stream);
  check_dtype(kOp, param, DType::f32);
  for (const Tensor* t : {&param, &exp_avg, &exp_avg_sq}) check_same_numel(kOp, *t, grad);
  const DType mtype = exp_avg.dtype();
  ZRT_CHECK_ARG((mtype == DType::f32 || mtype == DType::bf16) && exp_avg_sq.dtype() == mtype, kOp,
                ": exp_avg ", exp_avg.str(), " and exp_avg_sq ", exp_avg_sq.str(),
                " must be both f32 or both bf16");
  ZRT_CHECK_ARG(options.rounding.first_index >= 0, kOp, ": rounding.first_index must be >= 0 (got ",
                options.rounding.first_index, ")");
  check_kernel_float(kOp, grad);
  check_disjoint(kOp, {{"param", param}, {"exp_avg", exp_avg}, {"exp_avg_sq", exp_avg_sq}});
  for (const Tensor* state : {&param, &exp_avg, &exp_avg_sq})
    check_apart(kOp, *state, "grad", grad);
  const Tensor* out = options.param_out ? &*options.param_out : nullptr;
  if (out) {
    check_operands(kOp, {param, *out}, stream);
    check_same_numel(kOp, param, *out);
    check_disjoint(kOp, {{"param_out", *out},
                         {"param", param},
                         {"exp_avg", exp_avg},
                         {"exp_avg_sq", exp_avg_sq},
                         {"grad", grad}});
    ZRT_CHECK_ARG(out->dtype() == DType::bf16 || out->dtype() == DType::f16, kOp, ": param_out ",
                  out->str(), " must be bf16 or f16");
  }
  ZRT_CHECK_ARG(step >= 1, kOp, ": step must be >= 1 (got ", step, ")");
  ZRT_CHECK_ARG(std::isfinite(options.grad_scale), kOp, ": grad_scale must be finite (got ",
                options.grad_scale, ")");
  check_adamw_hyperparams(hp);
  const std::int64_t n = param.numel();
  const std::vector<AdamWPiece> pieces = make_pieces(n, decay_ranges);
  const AdamWCoefficients c = coefficients(hp, step, options.grad_scale);
  if (n == 0) return;

  const MomentRoundingKey key = rounding_key(options.rounding, step);
  float* p = static_cast<float*>(param.data_ptr());
  void* m = exp_avg.data_ptr();
  void* v = exp_avg_sq.data_ptr();
  ZRT_CUDA_LAUNCH_AND_RETURN(
      kOp, device,
      cuda::launch_adamw(p, m, v, mtype, grad.data_ptr(), grad.dtype(),
                         out ? out->data_ptr() : nullptr, out ? out->dtype() : DType::f32, pieces,
                         c, key, simple_kernel(FastKernel::elementwise), cuda_stream(stream)));
  std::vector<Tensor> written{param, exp_avg, exp_avg_sq};
  if (out) written.push_back(*out);
  run_cpu_twin_over(stream, kOp, written,
                    [p, m, v, mtype, gp = grad.data_ptr(), gtype = grad.dtype(),
                     op = out ? out->data_ptr() : nullptr, otype = out ? out->dtype() : DType::f32,
                     n, pieces, c, key] {
                      auto with_moments = [&](auto* mm, auto* vm) {
                        dispatch<StorageFloats>(gtype, kOp, [&](auto gt) {
                          using G = typename decltype(gt)::type;
                          const G* g = static_cast<const G*>(gp);
                          if (!op)
                            return adamw_cpu<G, NoParamOut>(p, mm, vm, g, nullptr, n, pieces, c,
                                                            key);
                          dispatch<StorageFloats>(otype, kOp, [&](auto lt) {
                            using L = typename decltype(lt)::type;
                            adamw_cpu<G, L>(p, mm, vm, g, static_cast<L*>(op), n, pieces, c, key);
                          });
                        });
                      };
                      if (mtype == DType::bf16)
                        with_moments(static_cast<bf16*>(m), static_cast<bf16*>(v));
                      else
                        with_moments(static_cast<float*>(m), static_cast<float*>(v));
                    });
}

}  // namespace zrt::kernels
