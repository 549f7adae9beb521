// Every CUDA runtime kernel against its CPU twin on the same inputs: bit for
// bit for cast (stochastic too), fill, flatten, accumulate and scale; within
// one ulp for AdamW and the norm. Device outputs are poisoned first. The
// elementwise ops' fast (16-byte vector) path against their simple one: bit
// for bit, on aligned views and on views one element off, which take the
// scalar fallback.
#include <bit>
#include <boost/test/unit_test.hpp>

#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/ops/adamw_reference.h"
#include "zrt/kernels/kernel_path.h"
#include "zrt/kernels/ops/adamw.h"
#include "zrt/kernels/ops/cast.h"
#include "zrt/kernels/ops/fill.h"
#include "zrt/kernels/ops/flatten.h"
#include "zrt/kernels/ops/grad_accumulate.h"
#include "zrt/kernels/ops/norm.h"
#include "zrt/kernels/ops/scale.h"

using namespace zrt;
using namespace zrt::test;

namespace {

const Device kGpu = Device::cuda(0);

// A device copy of `t` at an odd element offset.
Tensor on_gpu(const Tensor& t) {
  Tensor d = Tensor::empty({t.numel() + 5}, t.dtype(), kGpu).slice(5, t.numel());
  d.copy_(t);
  return d;
}

// An output of n elements at an odd offset, every byte 0xFF: NaN in the
// float dtypes, -1 or 255 in the integers (kernels::fill refuses NaN there),
// the same poison the CPU outputs get.
Tensor poisoned_gpu(std::int64_t n, DType t) {
  const Tensor h = odd_offset_view(n, t);
  poison(h);
  return on_gpu(h);
}

void require_same_bits(const Tensor& gpu, const Tensor& cpu, const std::string& what) {
  BOOST_REQUIRE_MESSAGE(bytes_of(gpu) == bytes_of(cpu), what << ": CUDA and CPU results differ");
}

// Within one unit in the last place of f32.
void require_within_ulp(const Tensor& gpu, const Tensor& cpu, const std::string& what) {
  const std::vector<double> g = gpu.to(Device::cpu()).to_doubles(), c = cpu.to_doubles();
  for (std::size_t i = 0; i < g.size(); ++i) {
    const float a = static_cast<float>(g[i]), b = static_cast<float>(c[i]);
    const auto ia = std::bit_cast<std::int32_t>(a), ib = std::bit_cast<std::int32_t>(b);
    BOOST_REQUIRE_MESSAGE(std::abs(std::int64_t(ia) - std::int64_t(ib)) <= 1,
                          what << "[" << i << "]: " << a << " vs " << b);
  }
}

// Lengths around the pack widths (4 f32 or 8 bf16 elements), with tails.
constexpr std::int64_t kPackSizes[] = {1, 7, 8, 1031, 65537};

// A device copy of `t` at the start of a fresh allocation (16-byte aligned)
// or one element past it (not 16-byte aligned, so the scalar fallback runs).
Tensor gpu_copy(const Tensor& t, bool aligned) {
  const std::int64_t off = aligned ? 0 : 1;
  Tensor d = Tensor::empty({t.numel() + off}, t.dtype(), kGpu).slice(off, t.numel());
  const bool at16 = reinterpret_cast<std::uintptr_t>(d.data_ptr()) % 16 == 0;
  BOOST_REQUIRE_MESSAGE(at16 == aligned, "device view alignment: want aligned=" << aligned);
  d.copy_(t);
  return d;
}

// A host copy of `t` (the CPU twin updates its operands in place).
Tensor cpu_copy(const Tensor& t) {
  Tensor c = odd_offset_view(t.numel(), t.dtype());
  c.copy_(t);
  return c;
}

// Runs `op` on copies of `operands` three times: on the device with the fast
// elementwise path, on the device with the simple one, and on the CPU. The
// device copies are aligned or one element off. Requires every operand
// after the op to have the same bits on both device paths, and, unless
// `cpu_within_ulp`, the same bits as the CPU twin too (else its f32
// operands within one ulp, AdamW's rule, the caller checking the others).
// Returns the fast path's operands.
template <class Op>
std::vector<Tensor> require_paths_agree(const std::string& what,
                                        const std::vector<Tensor>& operands, bool aligned, Op op,
                                        bool cpu_within_ulp = false) {
  auto run = [&](bool gpu, unsigned simple) {
    kernels::ScopedSimpleKernels path(simple);
    std::vector<Tensor> t;
    for (const Tensor& x : operands) t.push_back(gpu ? gpu_copy(x, aligned) : cpu_copy(x));
    op(t);
    return t;
  };
  const std::vector<Tensor> fast = run(true, 0);
  const std::vector<Tensor> simple =
      run(true, static_cast<unsigned>(kernels::FastKernel::elementwise));
  const std::vector<Tensor> cpu = run(false, 0);
  const std::string where = what + (aligned ? " (aligned)" : " (one element off)");
  for (std::size_t k = 0; k < operands.size(); ++k) {
    const std::string operand = where + " operand " + std::to_string(k);
    BOOST_REQUIRE_MESSAGE(bytes_of(fast[k]) == bytes_of(simple[k]),
                          operand << ": fast and simple paths differ");
    if (!cpu_within_ulp)
      require_same_bits(fast[k], cpu[k], operand);
    else if (operands[k].dtype() == DType::f32)
      require_within_ulp(fast[k], cpu[k], operand);
  }
  return fast;
}

Tensor poisoned_cpu(std::int64_t n, DType t) {
  Tensor h = odd_offset_view(n, t);
  poison(h);
  return h;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(kernels_gpu)

BOOST_AUTO_TEST_CASE(elementwise_fast_equals_simple) {
  auto gen = fresh_generator();  // its seed is printed with the test case's name
  const kernels::AdamWHyperparams hp{
      .lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  for (std::int64_t n : kPackSizes) {
    for (bool aligned : {true, false}) {
      BOOST_TEST_CONTEXT("n " << n << " aligned " << aligned) {
        for (DType from : {DType::f32, DType::bf16, DType::f16}) {
          const Tensor src = random_tensor(n, from, gen, -70000, 70000);
          for (DType to : {DType::f32, DType::bf16, DType::f16}) {
            require_paths_agree(std::string("cast ") + dtype_name(from) + "->" + dtype_name(to),
                                {src, poisoned_cpu(n, to)}, aligned,
                                [](std::vector<Tensor>& t) { kernels::cast(t[1], t[0]); });
          }
          require_paths_agree(std::string("scale_ ") + dtype_name(from),
                              {random_tensor(n, from, gen)}, aligned,
                              [](std::vector<Tensor>& t) { kernels::scale_(t[0], 0.37); });
          require_paths_agree(
              std::string("accumulate_grad ") + dtype_name(from),
              {random_tensor(n, DType::f32, gen), random_tensor(n, from, gen)}, aligned,
              [](std::vector<Tensor>& t) { kernels::accumulate_grad(t[0], t[1], 0.25f); });
        }
        require_paths_agree(
            "cast_stochastic", {random_tensor(n, DType::f32, gen), poisoned_cpu(n, DType::bf16)},
            aligned, [](std::vector<Tensor>& t) { kernels::cast_stochastic(t[1], t[0], 1234); });
        for (DType t : kAllDTypes)
          require_paths_agree(std::string("fill ") + dtype_name(t), {poisoned_cpu(n, t)}, aligned,
                              [](std::vector<Tensor>& t) { kernels::fill(t[0], 3.0); });
        for (DType gt : {DType::f32, DType::bf16}) {
          // One decayed piece over the whole shard (packed when aligned), then
          // random pieces, most starting off a pack boundary.
          for (const auto& ranges :
               {std::vector<kernels::ElementRange>{{0, n}}, random_decay_ranges(n, gen)}) {
            const std::vector<Tensor> state = {
                random_tensor(n, DType::f32, gen), random_tensor(n, DType::f32, gen, -0.1, 0.1),
                random_tensor(n, DType::f32, gen, 0, 0.01), random_tensor(n, gt, gen)};
            require_paths_agree(
                std::string("fused_adamw grad ") + dtype_name(gt), state, aligned,
                [&](std::vector<Tensor>& t) {
                  kernels::fused_adamw(t[0], t[1], t[2], t[3], 3, hp, ranges,
                                       {.grad_scale = 0.5, .param_out = std::nullopt});
                },
                true);
            std::vector<Tensor> with_out = state;
            with_out.push_back(poisoned_cpu(n, DType::bf16));
            const std::vector<Tensor> fast = require_paths_agree(
                std::string("fused_adamw to bf16, grad ") + dtype_name(gt), with_out, aligned,
                [&](std::vector<Tensor>& t) {
                  kernels::fused_adamw(t[0], t[1], t[2], t[3], 3, hp, ranges,
                                       {.grad_scale = 0.5, .param_out = t[4]});
                },
                true);
            const std::vector<double> param = fast[0].to(Device::cpu()).to_doubles(),
                                      out = fast[4].to(Device::cpu()).to_doubles();
            for (std::int64_t i = 0; i < n; ++i)
              BOOST_REQUIRE(same_value(out[i], round_to_bf16(param[i])));
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(cast_fill_scale_accumulate_bit_exact) {
  auto gen = fresh_generator();
  for (std::int64_t n : kSizes) {
    for (DType from : {DType::f32, DType::bf16, DType::f16}) {
      const Tensor src = random_tensor(n, from, gen, -70000, 70000);
      for (DType to : {DType::f32, DType::bf16, DType::f16}) {
        Tensor cpu = odd_offset_view(n, to), gpu = poisoned_gpu(n, to);
        kernels::cast(cpu, src);
        kernels::cast(gpu, on_gpu(src));
        require_same_bits(gpu, cpu,
                          std::string("cast ") + dtype_name(from) + "->" + dtype_name(to));
      }
      Tensor cpu = odd_offset_view(n, from),
             gpu = on_gpu(src);  // src.clone() of 0 elements holds no storage
      cpu.copy_(src);
      kernels::scale_(cpu, 0.37);
      kernels::scale_(gpu, 0.37);
      require_same_bits(gpu, cpu, "scale_");
      Tensor acc_cpu = random_tensor(n, DType::f32, gen), acc_gpu = on_gpu(acc_cpu);
      kernels::accumulate_grad(acc_cpu, src, 0.25f);
      kernels::accumulate_grad(acc_gpu, on_gpu(src), 0.25f);
      require_same_bits(acc_gpu, acc_cpu, "accumulate_grad");
    }
    const Tensor f32 = random_tensor(n, DType::f32, gen);
    Tensor cpu = odd_offset_view(n, DType::bf16), gpu = poisoned_gpu(n, DType::bf16);
    kernels::cast_stochastic(cpu, f32, 1234);
    kernels::cast_stochastic(gpu, on_gpu(f32), 1234);
    require_same_bits(gpu, cpu, "cast_stochastic");
    for (DType t : kAllDTypes) {
      Tensor fc = odd_offset_view(n, t), fg = poisoned_gpu(n, t);
      kernels::fill(fc, 3.0);
      kernels::fill(fg, 3.0);
      require_same_bits(fg, fc, std::string("fill ") + dtype_name(t));
    }
  }
}

BOOST_AUTO_TEST_CASE(flatten_bit_exact) {
  auto gen = fresh_generator();
  std::vector<Tensor> parts_cpu, parts_gpu;
  const std::vector<std::int64_t> offsets = {0, 8, 4112};
  for (std::int64_t n : {std::int64_t(3), std::int64_t(4097), std::int64_t(1)}) {
    parts_cpu.push_back(random_tensor(n, DType::f32, gen));
    parts_gpu.push_back(on_gpu(parts_cpu.back()));
  }
  Tensor flat_cpu = odd_offset_view(4200, DType::bf16), flat_gpu = poisoned_gpu(4200, DType::bf16);
  poison(flat_cpu);
  kernels::flatten_into(flat_cpu, parts_cpu, offsets);
  kernels::flatten_into(flat_gpu, parts_gpu, offsets);
  require_same_bits(flat_gpu, flat_cpu, "flatten_into");
  for (std::size_t k = 0; k < parts_cpu.size(); ++k) {
    poison(parts_cpu[k]);
    parts_gpu[k].copy_(parts_cpu[k]);
  }
  kernels::unflatten_from(parts_cpu, flat_cpu, offsets);
  kernels::unflatten_from(parts_gpu, flat_gpu, offsets);
  for (std::size_t k = 0; k < parts_cpu.size(); ++k)
    require_same_bits(parts_gpu[k], parts_cpu[k], "unflatten_from");
}

BOOST_AUTO_TEST_CASE(adamw_and_norm_within_one_ulp) {
  auto gen = fresh_generator();
  const kernels::AdamWHyperparams hp{
      .lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  for (std::int64_t n : kSizes) {
    for (DType gt : {DType::f32, DType::bf16}) {
      const auto ranges = random_decay_ranges(n, gen);
      Tensor p = random_tensor(n, DType::f32, gen),
             m = random_tensor(n, DType::f32, gen, -0.1, 0.1),
             v = random_tensor(n, DType::f32, gen, 0, 0.01), g = random_tensor(n, gt, gen);
      Tensor pg = on_gpu(p), mg = on_gpu(m), vg = on_gpu(v), gg = on_gpu(g);
      Tensor out_cpu = odd_offset_view(n, DType::bf16), out_gpu = poisoned_gpu(n, DType::bf16);
      kernels::fused_adamw(p, m, v, g, 3, hp, ranges, {.grad_scale = 0.5, .param_out = out_cpu});
      kernels::fused_adamw(pg, mg, vg, gg, 3, hp, ranges,
                           {.grad_scale = 0.5, .param_out = out_gpu});
      require_within_ulp(pg, p, "param");
      require_within_ulp(mg, m, "exp_avg");
      require_within_ulp(vg, v, "exp_avg_sq");
      const std::vector<double> oc = out_cpu.to_doubles(),
                                og = out_gpu.to(Device::cpu()).to_doubles();
      const std::vector<double> pc = pg.to(Device::cpu()).to_doubles();
      for (std::int64_t i = 0; i < n; ++i) BOOST_REQUIRE(same_value(og[i], round_to_bf16(pc[i])));

      const kernels::NormResult rc = kernels::squared_norm(g), rg = kernels::squared_norm(gg);
      BOOST_TEST(std::fabs(rc.squared_norm - rg.squared_norm) <= 0x1p-23 * rc.squared_norm);
      BOOST_TEST(rc.non_finite == rg.non_finite);
    }
  }
  Tensor bad = on_gpu(Tensor::from_doubles({1, 2, INFINITY, 4}, DType::bf16));
  BOOST_TEST(kernels::has_non_finite(bad));
}

BOOST_AUTO_TEST_SUITE_END()
