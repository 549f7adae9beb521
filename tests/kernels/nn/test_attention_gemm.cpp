// Attention's paths (Note [Attention paths]) and its GEMM path (Note
// [Attention on GEMMs]) on the CPU, call for call as CUDA runs it:
//  - the chooser as a pure function: each device's default, the simple
//    reference, forced paths where they exist, the workspace within the
//    budget, rounds of batch elements or of head groups;
//  - out, lse and dqkv of the GEMM path against the float64 row reference
//    of attention_math.h on the same (rounded) inputs, at odd sizes: f64
//    within 1e-12, f32 within 1e-5, bf16 within 2e-2 (probabilities and
//    outputs rounded to bf16), relative to 1 + max |reference|;
//  - every split into rounds (one pair, uneven head groups, uneven batch
//    groups, all at once) bit for bit the same;
//  - the op (attention_forward/backward) taking the GEMM path when forced,
//    and choosing it under ScopedCudaKernelPlan as a planned CUDA run does.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/nn/attention_reference.h"
#include "zrt/kernels/kernel_path.h"
#include "zrt/kernels/nn/attention.h"
#include "zrt/kernels/nn/attention_gemm.h"
#include "zrt/kernels/nn/attention_math.h"
#include "zrt/kernels/nn/attention_path.h"
#include "zrt/kernels/nn/nn_checks.h"

using namespace zrt;
using namespace zrt::kernels;

namespace {

AttentionQuery query(bool cuda, AttentionDims d, DType t) {
  AttentionQuery q;
  q.cuda = cuda;
  q.dims = d;
  q.dtype = t;
  return q;
}

const AttentionDims kGpt2{8, 1024, 768, 12, 64};

bool same(std::optional<AttentionPath> a, AttentionPath b) { return a && *a == b; }

struct Inputs {
  AttentionDims d;
  DType t;
  Tensor qkv, dout;
};

Inputs random_inputs(AttentionDims d, DType t, std::mt19937_64& gen) {
  std::uniform_real_distribution<double> dist(-2, 2);
  auto rnd = [&](std::int64_t n) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = dist(gen);
    return v;
  };
  const Shape qkv_shape{d.batch, d.seq, 3 * d.channels}, out_shape{d.batch, d.seq, d.channels};
  return {d, t,
          Tensor::from_doubles(rnd(d.batch * d.seq * 3 * d.channels), t, Device::cpu(), qkv_shape),
          Tensor::from_doubles(rnd(d.batch * d.seq * d.channels), t, Device::cpu(), out_shape)};
}

struct Outputs {
  Tensor out, lse, dqkv;
};

// The GEMM path with `choice`, from NaN-poisoned outputs.
Outputs run_gemm_path(const Inputs& in, const AttentionChoice& choice) {
  const AttentionDims& d = in.d;
  const DType at = acc_dtype(in.t);
  Outputs o{Tensor::full({d.batch, d.seq, d.channels}, NAN, in.t),
            Tensor::full({d.batch, d.heads, d.seq}, NAN, at),
            Tensor::full(in.qkv.shape(), NAN, in.t)};
  attention_gemm_forward(d, choice, in.qkv, o.out, o.lse, {});
  attention_gemm_backward(d, choice, in.dout, in.qkv, o.lse, o.dqkv, {});
  return o;
}

AttentionChoice gemm_choice(const AttentionDims& d, DType t, std::size_t budget) {
  AttentionQuery q = query(false, d, t);
  q.forced = AttentionPath::gemm;
  q.workspace_budget = budget;
  return choose_attention_path(q);
}

// The row reference of attention_math.h in float64 on the inputs' values.
Outputs reference(const Inputs& in) {
  const AttentionDims& d = in.d;
  const std::vector<double> qkv = in.qkv.to_doubles(), dout = in.dout.to_doubles();
  const test::AttentionReference ref = test::attention_reference(d, qkv, dout);
  const Shape qkv_shape{d.batch, d.seq, 3 * d.channels};
  return {Tensor::from_doubles(ref.out, DType::f64, Device::cpu(), {d.batch, d.seq, d.channels}),
          Tensor::from_doubles(ref.lse, DType::f64, Device::cpu(), {d.batch, d.heads, d.seq}),
          Tensor::from_doubles(ref.dqkv, DType::f64, Device::cpu(), qkv_shape)};
}

const AttentionDims kOddShapes[] = {
    {1, 1, 8, 1, 8},                        // one token
    {2, 7, 12, 3, 4},                       // odd T, three heads
    {3, 37, 36, 3, 12},                     // odd B and T
    {1, 64, 64, 2, 32}, {2, 19, 40, 5, 8},  // five heads
};

}  // namespace

BOOST_AUTO_TEST_SUITE(attention_paths)

BOOST_AUTO_TEST_CASE(the_chooser_picks_per_device_and_budget) {
  // Defaults.
  BOOST_TEST(int(choose_attention_path(query(false, kGpt2, DType::bf16)).path) ==
             int(AttentionPath::cpu_blocked));
  const AttentionChoice gpu = choose_attention_path(query(true, kGpt2, DType::bf16));
  BOOST_TEST(int(gpu.path) == int(AttentionPath::gemm));
  BOOST_TEST(gpu.heads_per_round == 12);
  // 1024² · (4 + 2) bytes a pair: 42 pairs in 256 MiB, 3 whole elements.
  BOOST_TEST(gpu.batch_per_round == 3);
  BOOST_TEST(gpu.workspace_bytes == std::size_t(36) * 1024 * 1024 * 6);
  BOOST_TEST(attention_gemm_pair_bytes(1024, DType::bf16) == std::size_t(1024) * 1024 * 6);
  BOOST_TEST(attention_gemm_pair_bytes(1024, DType::f64) == std::size_t(1024) * 1024 * 16);
  // The simple reference wins over everything on CUDA.
  AttentionQuery simple = query(true, kGpt2, DType::bf16);
  simple.simple = true;
  simple.forced = AttentionPath::gemm;
  BOOST_TEST(int(choose_attention_path(simple).path) == int(AttentionPath::simple));
  // A pair over the budget: tiled; forced, the gemm path in rounds of one pair.
  AttentionQuery huge = query(true, {1, 8192, 768, 12, 64}, DType::bf16);
  BOOST_TEST(int(choose_attention_path(huge).path) == int(AttentionPath::tiled));
  huge.forced = AttentionPath::gemm;
  const AttentionChoice one = choose_attention_path(huge);
  BOOST_TEST(int(one.path) == int(AttentionPath::gemm));
  BOOST_TEST(one.heads_per_round == 1);
  BOOST_TEST(one.batch_per_round == 1);
  // Head groups when an element's heads do not fit: 4096² · 6 bytes = 96 MiB.
  const AttentionChoice groups =
      choose_attention_path(query(true, {4, 4096, 768, 12, 64}, DType::bf16));
  BOOST_TEST(int(groups.path) == int(AttentionPath::gemm));
  BOOST_TEST(groups.heads_per_round == 2);
  BOOST_TEST(groups.batch_per_round == 1);
  // Forced paths only where they exist.
  AttentionQuery cpu = query(false, kGpt2, DType::f32);
  cpu.forced = AttentionPath::tiled;
  BOOST_TEST(int(choose_attention_path(cpu).path) == int(AttentionPath::cpu_blocked));
  cpu.forced = AttentionPath::gemm;
  BOOST_TEST(int(choose_attention_path(cpu).path) == int(AttentionPath::gemm));
  AttentionQuery gpu_blocked = query(true, kGpt2, DType::f32);
  gpu_blocked.forced = AttentionPath::cpu_blocked;
  BOOST_TEST(int(choose_attention_path(gpu_blocked).path) == int(AttentionPath::gemm));
  gpu_blocked.forced = AttentionPath::tiled;
  BOOST_TEST(int(choose_attention_path(gpu_blocked).path) == int(AttentionPath::tiled));
  BOOST_TEST(choose_attention_path(gpu_blocked).workspace_bytes == 0u);
  // flash: bf16/f16 on sm_80 or newer (or a dry run, which knows no GPU).
  AttentionQuery flash = query(true, kGpt2, DType::bf16);
  flash.forced = AttentionPath::flash;
  for (const int cc : {0, 80, 90}) {
    flash.compute_capability = cc;
    BOOST_TEST(int(choose_attention_path(flash).path) == int(AttentionPath::flash));
  }
  flash.compute_capability = 75;
  BOOST_TEST(int(choose_attention_path(flash).path) == int(AttentionPath::gemm));
  flash.compute_capability = 90;
  flash.dtype = DType::f32;
  BOOST_TEST(int(choose_attention_path(flash).path) == int(AttentionPath::gemm));
}

BOOST_AUTO_TEST_CASE(unforced_workspaces_stay_within_the_budget) {
  auto gen = zrt::test::fresh_generator();
  std::uniform_int_distribution<std::int64_t> small(1, 40), seq(1, 9000);
  for (int i = 0; i < 2000; ++i) {
    const std::int64_t heads = small(gen), batch = small(gen), t = seq(gen);
    for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
      const AttentionChoice c =
          choose_attention_path(query(true, {batch, t, heads * 8, heads, 8}, dt));
      if (c.path != AttentionPath::gemm) {
        BOOST_TEST(attention_gemm_pair_bytes(t, dt) > kAttentionWorkspaceBudget);
        continue;
      }
      BOOST_TEST(c.workspace_bytes <= kAttentionWorkspaceBudget);
      BOOST_TEST((c.batch_per_round == 1 || c.heads_per_round == heads));
      BOOST_TEST(c.batch_per_round <= batch);
      BOOST_TEST(c.heads_per_round <= heads);
    }
  }
}

BOOST_AUTO_TEST_CASE(path_names_and_the_scoped_override) {
  BOOST_TEST(same(parse_attention_path(" gemm "), AttentionPath::gemm));
  BOOST_TEST(same(parse_attention_path("tiled"), AttentionPath::tiled));
  BOOST_TEST(!parse_attention_path("Gemm").has_value());
  BOOST_TEST(!parse_attention_path("").has_value());
  {
    ScopedAttentionPath outer(AttentionPath::tiled);
    BOOST_TEST(same(forced_attention_path(), AttentionPath::tiled));
    {
      ScopedAttentionPath inner(std::nullopt);
      BOOST_TEST(!forced_attention_path().has_value());
    }
    BOOST_TEST(same(forced_attention_path(), AttentionPath::tiled));
  }
  BOOST_TEST(!planning_cuda_kernels());
  {
    ScopedCudaKernelPlan plan;
    BOOST_TEST(planning_cuda_kernels());
  }
  BOOST_TEST(!planning_cuda_kernels());
}

BOOST_AUTO_TEST_CASE(gemm_path_matches_the_float64_reference) {
  auto gen = zrt::test::fresh_generator();
  for (const AttentionDims& d : kOddShapes) {
    for (DType t : {DType::f64, DType::f32, DType::bf16}) {
      BOOST_TEST_CONTEXT("B " << d.batch << " T " << d.seq << " H " << d.heads << " hd "
                              << d.head_dim << " " << dtype_name(t)) {
        const Inputs in = random_inputs(d, t, gen);
        const Outputs got = run_gemm_path(in, gemm_choice(d, t, kAttentionWorkspaceBudget));
        const Outputs ref = reference(in);
        const double tol = t == DType::f64 ? 1e-12 : t == DType::f32 ? 1e-5 : 2e-2;
        zrt::test::check_close("out", ref.out.to_doubles(), got.out.to_doubles(), tol);
        zrt::test::check_close("lse", ref.lse.to_doubles(), got.lse.to_doubles(), tol);
        zrt::test::check_close("dqkv", ref.dqkv.to_doubles(), got.dqkv.to_doubles(), tol);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(every_split_into_rounds_gives_the_same_bits) {
  auto gen = zrt::test::fresh_generator();
  const AttentionDims d{3, 21, 30, 3, 10};  // 3 elements of 3 heads
  for (DType t : {DType::f32, DType::bf16}) {
    const Inputs in = random_inputs(d, t, gen);
    const std::size_t pair = attention_gemm_pair_bytes(d.seq, t);
    const Outputs all = run_gemm_path(in, gemm_choice(d, t, kAttentionWorkspaceBudget));
    BOOST_TEST(gemm_choice(d, t, kAttentionWorkspaceBudget).batch_per_round == 3);
    // One pair; two heads (groups of 2 and 1); two elements (2 and 1).
    for (std::size_t pairs : {std::size_t(1), std::size_t(2), std::size_t(6)}) {
      const AttentionChoice c = gemm_choice(d, t, pairs * pair);
      BOOST_TEST_CONTEXT(dtype_name(t)
                         << ", rounds of " << c.batch_per_round << " x " << c.heads_per_round) {
        BOOST_TEST(c.batch_per_round * c.heads_per_round == std::int64_t(pairs));
        const Outputs split = run_gemm_path(in, c);
        BOOST_TEST((zrt::test::bytes_of(split.out) == zrt::test::bytes_of(all.out)));
        BOOST_TEST((zrt::test::bytes_of(split.lse) == zrt::test::bytes_of(all.lse)));
        BOOST_TEST((zrt::test::bytes_of(split.dqkv) == zrt::test::bytes_of(all.dqkv)));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(the_op_takes_the_gemm_path_when_forced) {
  auto gen = zrt::test::fresh_generator();
  const AttentionDims d{2, 23, 24, 2, 12};
  const Inputs in = random_inputs(d, DType::f32, gen);
  const Outputs direct = run_gemm_path(in, gemm_choice(d, DType::f32, kAttentionWorkspaceBudget));
  auto through_op = [&] {
    Outputs o{Tensor::full({d.batch, d.seq, d.channels}, NAN, DType::f32),
              Tensor::full({d.batch, d.heads, d.seq}, NAN, DType::f32),
              Tensor::full(in.qkv.shape(), NAN, DType::f32)};
    attention_forward(in.qkv, o.out, o.lse, d.heads);
    attention_backward(in.dout, in.qkv, o.out, o.lse, o.dqkv, d.heads);
    return o;
  };
  const Outputs blocked = through_op();  // the CPU default
  {
    ScopedAttentionPath gemm(AttentionPath::gemm);
    const Outputs forced = through_op();
    BOOST_TEST((zrt::test::bytes_of(forced.out) == zrt::test::bytes_of(direct.out)));
    BOOST_TEST((zrt::test::bytes_of(forced.dqkv) == zrt::test::bytes_of(direct.dqkv)));
  }
  {
    ScopedCudaKernelPlan plan;  // planned as CUDA: its default, the gemm path
    const Outputs planned = through_op();
    BOOST_TEST((zrt::test::bytes_of(planned.dqkv) == zrt::test::bytes_of(direct.dqkv)));
  }
  // The CPU default is another path: the same values within rounding only.
  zrt::test::check_close("blocked out", blocked.out.to_doubles(), direct.out.to_doubles(), 1e-5);
  BOOST_TEST((zrt::test::bytes_of(blocked.dqkv) != zrt::test::bytes_of(direct.dqkv)));
}

BOOST_AUTO_TEST_SUITE_END()
