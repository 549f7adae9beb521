#include "tests/optim/flat_param/handle_checks.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "tests/optim/flat_param/counting_allocator.h"
#include "tests/support/rank_check.h"
#include "zrt/kernels/ops/quantize_math.h"
#include "zrt/optim/flat_param/flat_param_handle.h"
#include "zrt/optim/flat_param/sharding_groups.h"

namespace zrt::testing {

namespace {

// Odd shapes, a scalar-like [1], one smaller than any world, a tied name.
const std::vector<Shape> kShapes = {{3, 5}, {1}, {7}, {2, 3, 2}, {4097}};

struct Params {
  std::vector<optim::NamedParam> named;
  std::vector<std::vector<double>> values;  // per primary parameter
};

// Fresh tensors with the same seeded values on every rank; parameter i's
// standard deviation is scale[i] (1 where not given).
Params make_params(unsigned seed, const std::vector<double>& scale = {}) {
  Params p;
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(0.0, 1.0);
  for (std::size_t i = 0; i < kShapes.size(); ++i) {
    std::vector<double> v(static_cast<std::size_t>(shape_numel(kShapes[i])));
    const double s = i < scale.size() ? scale[i] : 1.0;
    for (auto& x : v) x = static_cast<float>(s * dist(gen));
    p.values.push_back(v);
    p.named.push_back({"layer" + std::to_string(i), "weight",
                       Tensor::from_doubles(v, DType::f32, Device::cpu(), kShapes[i])});
  }
  p.named.push_back({"head", "weight", p.named[0].tensor});  // tied to layer0.weight
  return p;
}

optim::FlatParamOptions options_for(const optim::StrategyPlan& plan, DType param_dtype,
                                    AllocatorPtr alloc) {
  optim::FlatParamOptions o;
  o.name = "unit";
  o.param_dtype = param_dtype;
  o.reshard_after_forward = plan.reshard_after_forward;
  o.reshard_after_backward = plan.reshard_after_backward;
  o.allocator = std::move(alloc);
  return o;
}

double rounded(double x, DType t) { return Tensor::from_doubles({x}, t).item(0); }

// A small integer gradient for (rank, micro-batch, parameter, element): sums are exact.
// Gradients of magnitudes 2^-6 to 2^6 side by side (Note [Quantization
// blocks within one parameter]); powers of two keep every sum exact.
double grad_value(int rank, int micro, std::size_t param, std::int64_t e) {
  constexpr double kScale[] = {1.0, 0x1p6, 0x1p-6, 1.0, 0x1p-3};
  return kScale[param % 5] *
         static_cast<double>(
             ((rank + 1) * 5 + micro * 3 + static_cast<int>(param) * 11 + e * 7) % 17 - 8);
}

// [first, end) of the quantization block of flat element f of parameter i:
// its `block` elements of f's zero1 chunk, of parameter i only (Note
// [Quantization blocks within one parameter]: no other parameter shares it).
std::pair<std::int64_t, std::int64_t> own_block(const optim::FlatParamLayout& l, int w1,
                                                std::size_t i, std::int64_t f,
                                                std::int64_t block = 256) {
  const std::int64_t n1 = l.shard_numel(w1), grid = f - (f % n1) % block;
  return {std::max(grid, l.param_offset(i)),
          std::min({grid + block, (f / n1 + 1) * n1, l.param_offset(i) + shape_numel(kShapes[i])})};
}

}  // namespace

void check_round_trip(const CommPtr& world, optim::ShardingStrategy strategy, int zero3_size,
                      DType param_dtype) {
  optim::StrategyPlan plan = optim::plan_strategy(strategy, world, zero3_size);
  Params p = make_params(42);
  auto alloc = std::make_shared<CountingAllocator>();
  optim::FlatParamHandle h(p.named, plan.groups, options_for(plan, param_dtype, alloc));
  ZRT_EXPECT(h.num_params() == kShapes.size(), "sizes differ");
  ZRT_EXPECT(h.index_of("head.weight") == 0u, "check failed on rank ", world->rank());
  for (int pass = 0; pass < 2; ++pass) {  // pass 0 gathers zero1, pass 1 zero3
    ZRT_EXPECT(h.needs_param_sync() == (pass == 0), "check failed on rank ", world->rank());
    h.pre_forward();
    for (std::size_t i = 0; i < kShapes.size(); ++i) {
      Tensor v = h.param(i);
      ZRT_EXPECT(v.shape() == kShapes[i], "shape of param ", i);
      auto got = v.to_doubles();
      for (std::size_t e = 0; e < got.size(); ++e)
        ZRT_EXPECT(got[e] == rounded(p.values[i][e], param_dtype), "pass ", pass, " param ", i,
                   " element ", e, " rank ", world->rank());
    }
    h.post_forward();
    ZRT_EXPECT(h.is_unsharded() == !plan.reshard_after_forward, "check failed on rank ",
               world->rank());
    if (!plan.reshard_after_forward) free_storage(h.full_param_padded());
  }
  // The fp32 master survives untouched: summon gives back the originals exactly.
  auto full = h.summon_full_params();
  for (std::size_t i = 0; i < kShapes.size(); ++i)
    ZRT_EXPECT(full[i].to_doubles() == p.values[i], "check failed on rank ", world->rank());
  // load_full_params then unshard shows the new values.
  std::vector<Tensor> doubled;
  for (auto& t : full) {
    auto v = t.to_doubles();
    for (auto& x : v) x *= 2;
    doubled.push_back(Tensor::from_doubles(v, DType::f64, Device::cpu(), t.shape()));
  }
  h.load_full_params(doubled);
  h.pre_forward();
  ZRT_EXPECT(h.param(4).item(4096) == rounded(2 * p.values[4][4096], param_dtype),
             "check failed on rank ", world->rank());
  h.post_forward();
}

void check_gradient_path(const CommPtr& world, optim::ShardingStrategy strategy, int zero3_size,
                         ReduceOp op, int micro_batches, bool offload, optim::ReduceDType reduce) {
  optim::StrategyPlan plan = optim::plan_strategy(strategy, world, zero3_size);
  Params p = make_params(7);
  auto alloc = std::make_shared<CountingAllocator>();
  optim::FlatParamOptions o = options_for(plan, DType::f32, alloc);
  o.grad_reduce.op = op;
  o.grad_reduce.offload = offload;
  o.grad_reduce.dtype = reduce;
  optim::FlatParamHandle h(p.named, plan.groups, o);
  const std::size_t sharded_bytes = alloc->stats().allocated;
  const int w1 = plan.groups.zero1->size();
  const bool quantized = reduce == optim::ReduceDType::int8 || reduce == optim::ReduceDType::int4;
  ZRT_EXPECT(h.reduces_quantized() == (quantized && w1 > 1), "rank ", world->rank());
  // Every rank's quantization error bound of flat element f: half the scale
  // (max|x| / 127, int4: / 7) of f's block (own_block: 256 elements of its
  // zero1 chunk, int4: kInt4Block) of the rank's fp32 gradient, summed over
  // the ranks (Note [Quantized gradient reduce-scatter]).
  const double q_max = reduce == optim::ReduceDType::int4 ? 7 : 127;
  const std::int64_t block = reduce == optim::ReduceDType::int4 ? kernels::kInt4Block : 256;
  const optim::FlatParamLayout& l = h.layout();
  std::vector<std::vector<double>> rank_grads;  // each rank's flat fp32 gradient of a step
  for (int r = 0; r < world->size() && h.reduces_quantized(); ++r) {
    rank_grads.emplace_back(static_cast<std::size_t>(l.numel_padded()), 0.0);
    for (std::size_t i = 0; i < kShapes.size(); ++i)
      for (std::int64_t k = 0; k < shape_numel(kShapes[i]); ++k)
        for (int m = 0; m < micro_batches; ++m)
          rank_grads.back()[static_cast<std::size_t>(l.param_offset(i) + k)] +=
              grad_value(r, m, i, k);
  }
  auto quantization_bound = [&](std::size_t param, std::int64_t e) {
    const auto [first, end] = own_block(l, w1, param, l.param_offset(param) + e, block);
    double bound = 0;
    for (const std::vector<double>& g : rank_grads) {
      double amax = 0;
      for (std::int64_t k = first; k < end; ++k)
        amax = std::max(amax, std::fabs(g[static_cast<std::size_t>(k)]));
      bound += amax / q_max / 2 * (1 + 0x1p-20);
    }
    return bound;
  };

  for (int step = 0; step < 2; ++step) {  // the second step checks nothing leaks across steps
    for (int m = 0; m < micro_batches; ++m) {
      h.pre_forward();
      h.post_forward();
      h.pre_backward();
      for (std::size_t i = 0; i < kShapes.size(); ++i) {
        Tensor g = h.grad(i);
        std::vector<double> v(static_cast<std::size_t>(g.numel()));
        for (std::size_t e = 0; e < v.size(); ++e)
          v[e] = grad_value(world->rank(), m, i, static_cast<std::int64_t>(e));
        g.copy_(Tensor::from_doubles(v, DType::f64, Device::cpu(), g.shape()));
      }
      const bool last = m + 1 == micro_batches;
      h.post_backward(last);
      if (!last)
        ZRT_EXPECT(h.full_prec_grad_padded().is_freed() == offload, "check failed on rank ",
                   world->rank());
    }
    // Every rank's gradient shard equals the reduction over all ranks and micro-batches.
    const int W = world->size();
    for (std::size_t i = 0; i < kShapes.size(); ++i) {
      const auto& info = h.zero1_shard_infos()[i];
      auto got = h.sharded_grad(i).to_doubles();
      ZRT_EXPECT(static_cast<std::int64_t>(got.size()) == info.numel_in_shard, "sizes differ");
      for (std::int64_t k = 0; k < info.numel_in_shard; ++k) {
        double expect = 0;
        for (int r = 0; r < W; ++r)
          for (int m = 0; m < micro_batches; ++m)
            expect += grad_value(r, m, i, info.intra_param_start + k);
        const double bound =
            (quantization_bound(i, info.intra_param_start + k) + 1e-6 * std::abs(expect)) /
            (op == ReduceOp::avg ? W : 1);
        if (op == ReduceOp::avg) expect /= W;
        ZRT_EXPECT(std::abs(got[k] - expect) <= std::max(bound, 1e-6), "param ", i, " element ",
                   info.intra_param_start + k, ": ", got[k], " != ", expect, " (rank ",
                   world->rank(), ")");
      }
    }
    // Unsharded parameter and gradients are released: back to the sharded footprint.
    if (plan.reshard_after_backward) {
      ZRT_EXPECT(alloc->stats().allocated == sharded_bytes, "check failed on rank ", world->rank());
    } else {
      // Kept unsharded: its own bytes, unless it is the fp32 master of a zero1 group of one.
      const std::size_t kept =
          h.unsharded_is_master() ? 0 : h.full_param_padded().storage().nbytes();
      ZRT_EXPECT(alloc->stats().allocated == sharded_bytes + kept, "check failed on rank ",
                 world->rank());
    }
    ZRT_EXPECT(h.full_grad_padded().is_freed(), "check failed on rank ", world->rank());
    ZRT_EXPECT(h.full_prec_grad_padded().is_freed(), "check failed on rank ", world->rank());
    h.mark_params_updated();
  }
}

void check_quantized_gather(const CommPtr& world, optim::ShardingStrategy strategy, int zero3_size,
                            DType param_dtype) {
  optim::StrategyPlan plan = optim::plan_strategy(strategy, world, zero3_size);
  // Magnitudes 1e-2 to 1e2 side by side, as a LayerNorm weight and bias are
  // (Note [Quantization blocks within one parameter]).
  Params p = make_params(7, {1.0, 100.0, 0.01, 1.0, 0.1});
  optim::FlatParamOptions o = options_for(plan, param_dtype, std::make_shared<CountingAllocator>());
  o.gather.dtype = optim::GatherDType::int8;
  optim::FlatParamHandle h(p.named, plan.groups, o);
  const int w1 = plan.groups.zero1->size();
  ZRT_EXPECT(h.gathers_quantized() == (w1 > 1), "rank ", world->rank());
  // The flat master in float64: the parameters at their offsets, zeros between.
  const optim::FlatParamLayout& l = h.layout();
  std::vector<double> flat(static_cast<std::size_t>(l.numel_padded()), 0.0);
  for (std::size_t i = 0; i < kShapes.size(); ++i)
    for (std::size_t e = 0; e < p.values[i].size(); ++e)
      flat[static_cast<std::size_t>(l.param_offset(i)) + e] = p.values[i][e];
  // Each element's scale: max|x| / 127 over its block (own_block).
  auto scale_of = [&](std::size_t i, std::int64_t f) {
    const auto [first, end] = own_block(l, w1, i, f);
    double amax = 0;
    for (std::int64_t k = first; k < end; ++k)
      amax = std::max(amax, std::fabs(flat[static_cast<std::size_t>(k)]));
    return amax / 127;
  };
  // The output dtype's rounding to nearest, relative.
  const double out_eps = param_dtype == DType::f32    ? 0
                         : param_dtype == DType::bf16 ? 0x1p-8
                                                      : 0x1p-11;
  std::vector<std::vector<double>> first_pass;
  for (int pass = 0; pass < 2; ++pass) {  // pass 0 gathers zero1, pass 1 zero3
    h.pre_forward();
    for (std::size_t i = 0; i < kShapes.size(); ++i) {
      const std::vector<double> got = h.param(i).to_doubles();
      if (pass == 0) first_pass.push_back(got);
      ZRT_EXPECT(got == first_pass[i], "the zero3 gather differs from the zero1 gather: param ", i,
                 " rank ", world->rank());
      for (std::size_t e = 0; e < got.size(); ++e) {
        const double x = p.values[i][e];
        const double bound =
            w1 == 1 ? std::fabs(rounded(x, param_dtype) - x)
                    : scale_of(i, l.param_offset(i) + std::int64_t(e)) / 2 * (1 + 0x1p-20) +
                          out_eps * std::fabs(got[e]);
        ZRT_EXPECT(std::fabs(got[e] - x) <= bound, "param ", i, " element ", e, ": ", x,
                   " gathered as ", got[e], ", more than ", bound, " away (rank ", world->rank(),
                   ")");
      }
    }
    h.post_forward();
    if (!plan.reshard_after_forward) free_storage(h.full_param_padded());
  }
  // The master is untouched: summon gives back the originals exactly.
  auto full = h.summon_full_params();
  for (std::size_t i = 0; i < kShapes.size(); ++i)
    ZRT_EXPECT(full[i].to_doubles() == p.values[i], "master changed on rank ", world->rank());
  // A NaN in the master reaches the unsharded parameter (its block, with int8).
  full[4].set_item(100, NAN);
  h.load_full_params(full);
  h.pre_forward();
  const std::vector<double> got = h.param(4).to_doubles();
  ZRT_EXPECT(std::isnan(got[100]), "a NaN in the master was lost on rank ", world->rank());
  std::size_t nans = 0;
  for (double v : got) nans += std::isnan(v);
  ZRT_EXPECT(nans <= 256 && (w1 > 1 || nans == 1), nans, " NaN on rank ", world->rank());
  h.post_forward();
}

void check_quantized_gather_bytes(const CommPtr& world) {
  optim::StrategyPlan plan = optim::plan_strategy(optim::ShardingStrategy::full_shard, world, 0);
  const std::vector<optim::NamedParam> big = {
      {"w", "weight", Tensor::full({301, 113}, 0.5, DType::f32)}};
  auto chunk_bytes = [&](DType param_dtype, optim::GatherDType gather) {
    optim::FlatParamOptions o = options_for(plan, param_dtype, {});
    o.gather.dtype = gather;
    optim::FlatParamHandle h(big, plan.groups, o);
    return double(h.gather_chunk_bytes());
  };
  const double int8 = chunk_bytes(DType::bf16, optim::GatherDType::int8);
  const double f32 = chunk_bytes(DType::f32, optim::GatherDType::compute);
  const double bf16 = chunk_bytes(DType::bf16, optim::GatherDType::compute);
  if (world->size() == 1) {  // nothing is gathered, nothing quantized
    ZRT_EXPECT(int8 == bf16, "a world of one quantized its gather");
    return;
  }
  ZRT_EXPECT(f32 / int8 >= 3.5 && bf16 / int8 >= 1.75, "int8 gathers ", int8,
             " bytes a rank, fp32 ", f32, ", bf16 ", bf16);
}

void check_mismatch_is_named(const CommPtr& world) {
  Params p = make_params(1);
  if (world->rank() == world->size() - 1)
    p.named[2].tensor = Tensor::zeros({8}, DType::f32);  // layer2.weight is [7] elsewhere
  optim::StrategyPlan plan = optim::plan_strategy(optim::ShardingStrategy::full_shard, world, 0);
  try {
    optim::FlatParamHandle h(p.named, plan.groups, options_for(plan, DType::f32, nullptr));
    ZRT_EXPECT(world->size() == 1, "a mis-shaped parameter on one rank was not detected");
  } catch (const InvalidArgument& e) {
    std::string what = e.what();
    ZRT_EXPECT(what.find("layer2.weight") != std::string::npos, what);
    ZRT_EXPECT(what.find("rank " + std::to_string(world->size() - 1)) != std::string::npos, what);
  }
}

}  // namespace zrt::testing
