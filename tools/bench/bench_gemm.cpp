// zrt-bench gemm [--n-embd C] [--tokens N] [--vocab V] [--threads T] [--isa I]
//                [--gemm eigen|openblas|all] [--reps R] [--json]
//
// Times kernels::gemm on the GEMMs of one GPT block and the LM head (forward
// and both backward products, with the transposes Linear uses), default
// GPT-2 124M at 256 tokens per rank, and gives each as GFLOP/s and as a
// fraction of the fp32 peak an FMA loop reaches on the same threads in the
// same run (Note [Measured fp32 peak]). --gemm all times every CPU GEMM
// backend this build has (Note [CPU GEMM backends]) on each shape in turn, so
// they are compared under the same load.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tools/bench/bench_util.h"
#include "tools/bench/fp32_peak.h"
#include "tools/bench/suites.h"
#include "zrt/kernels/cpu_blas/cpu_gemm.h"
#include "zrt/kernels/cpu_isa/isa_kernels.h"
#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/nn/gemm.h"
#include "zrt/runtime/error.h"
#include "zrt/runtime/tensor.h"

namespace zrt::bench {
namespace {

// `e`, a refusal of environment variable `var`'s value ("VAR='x': ..." or
// "VAR=x: ..."), as one of flag `flag`, which sets it: "FLAG x: ...".
[[noreturn]] void rethrow_as_flag(const InvalidArgument& e, const std::string& var,
                                  const std::string& flag) {
  std::string text = e.what();
  const std::string prefix = var + "=";
  if (text.starts_with(prefix)) {
    const bool quoted = text.size() > prefix.size() && text[prefix.size()] == '\'';
    const size_t start = prefix.size() + (quoted ? 1 : 0);
    const size_t end =
        std::min(quoted ? text.find("' ", start) : text.find(':', start), text.size());
    const size_t rest = std::min(end + (quoted ? 1 : 0), text.size());
    text = flag + " " + text.substr(start, end - start) + text.substr(rest);
  }
  throw InvalidArgument(text, e.file(), e.line(), e.expr());
}

struct Options {
  std::int64_t n_embd = 768, tokens = 256, vocab = 50257;
  int threads = 1, reps = 5;
  std::string isa, gemm;
  bool json = false;
};

Options parse(int argc, char** argv) {
  Options o;
  OptionParser("gemm",
               "usage: zrt-bench gemm [--n-embd C] [--tokens N] [--vocab V] [--threads T] "
               "[--isa baseline|avx2|avx512] [--gemm eigen|openblas|all] [--reps R] [--json]")
      .value("--n-embd", o.n_embd)
      .value("--tokens", o.tokens)
      .value("--vocab", o.vocab)
      .value("--threads", o.threads)
      .value("--isa", o.isa)
      .value("--gemm", o.gemm)
      .runs(o.reps, o.json)
      .parse(argc, argv);
  ZRT_CHECK_ARG(o.n_embd > 0 && o.tokens > 0 && o.vocab > 0 && o.threads > 0,
                "--n-embd, --tokens, --vocab and --threads must be positive");
  ZRT_CHECK_ARG(o.threads <= kernels::kMaxCpuThreads, "--threads ", o.threads, " is more than ",
                kernels::kMaxCpuThreads);
  ZRT_CHECK_ARG(o.gemm.empty() || o.gemm == "eigen" || o.gemm == "openblas" || o.gemm == "all",
                "--gemm ", o.gemm, " is not one of eigen, openblas, all");
  if (!o.isa.empty()) try {  // the names ZRT_CPU_ISA takes, which --isa sets
      (void)kernels::isa_kernels_capped(o.isa.c_str());
    } catch (const InvalidArgument& e) {
      rethrow_as_flag(e, "ZRT_CPU_ISA", "--isa");
    }
  return o;
}

Tensor random_matrix(std::int64_t rows, std::int64_t cols, std::mt19937& gen) {
  std::normal_distribution<double> dist(0, 0.02);
  std::vector<double> v(static_cast<std::size_t>(rows * cols));
  for (auto& x : v) x = dist(gen);
  return Tensor::from_doubles(v, DType::f32, Device::cpu(), {rows, cols});
}

// The backends --gemm names: one, every one this build has, or the default.
std::vector<const kernels::CpuGemmBackend*> backends_to_time(const std::string& name) {
  if (name != "all") try {
      return {&kernels::cpu_gemm_named(name.c_str())};
    } catch (const InvalidArgument& e) {  // OpenBLAS missing here, in ZRT_CPU_GEMM's words
      rethrow_as_flag(e, "ZRT_CPU_GEMM", "--gemm");
    }
  std::vector<const kernels::CpuGemmBackend*> all;
  for (auto which : {kernels::CpuGemm::eigen, kernels::CpuGemm::openblas})
    if (const auto* b = kernels::cpu_gemm_for(which)) all.push_back(b);
  return all;
}

struct Case {
  std::string name;
  std::int64_t m, n, k;
  bool trans_a, trans_b;
};

}  // namespace

int bench_gemm(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (!o.isa.empty()) ::setenv("ZRT_CPU_ISA", o.isa.c_str(), 1);
  kernels::set_cpu_threads(o.threads);
  const auto backends = backends_to_time(o.gemm);
  const std::int64_t c = o.n_embd, t = o.tokens;
  // Linear y[t, out] = x[t, in] · Wᵀ (W stored [out, in]): forward, dx = dy · W,
  // dW = dyᵀ · x.
  std::vector<Case> cases;
  for (auto [what, in, out] : {std::tuple<std::string, std::int64_t, std::int64_t>{"qkv", c, 3 * c},
                               {"attn proj", c, c},
                               {"fc", c, 4 * c},
                               {"fc proj", 4 * c, c},
                               {"lm head", c, o.vocab}}) {
    cases.push_back({what + " fwd", t, out, in, false, true});
    cases.push_back({what + " dx", t, in, out, false, false});
    cases.push_back({what + " dW", out, in, t, true, false});
  }
  const double peak = [&] {
    double best = 0;
    for (int i = 0; i < 3; ++i) {
      const FmaLoopRun r = run_fma_loop(o.threads, 0.1);
      best = std::max(best, r.flops / r.seconds / 1e9);
    }
    return best;
  }();
  std::mt19937 gen(7);
  Table table({"gemm", "backend", "m", "n", "k", "ms", "GFLOP/s", "of peak"});
  std::vector<double> seconds_all(backends.size(), 0.0);
  double flops_all = 0;
  for (const Case& g : cases) {
    Tensor a = g.trans_a ? random_matrix(g.k, g.m, gen) : random_matrix(g.m, g.k, gen);
    Tensor b = g.trans_b ? random_matrix(g.n, g.k, gen) : random_matrix(g.k, g.n, gen);
    Tensor out = Tensor::empty({g.m, g.n}, DType::f32);
    const double flops = 2.0 * double(g.m) * double(g.n) * double(g.k);
    flops_all += flops;
    for (std::size_t i = 0; i < backends.size(); ++i) {
      const double s = median_seconds(
          [&] { kernels::gemm_with(*backends[i], a, g.trans_a, b, g.trans_b, out); }, 2, o.reps);
      seconds_all[i] += s;
      table.add({g.name, backends[i]->name, std::to_string(g.m), std::to_string(g.n),
                 std::to_string(g.k), Table::num(s * 1e3), Table::num(flops / s / 1e9),
                 Table::num(flops / s / 1e9 / peak)});
    }
  }
  for (std::size_t i = 0; i < backends.size(); ++i)
    table.add({"all", backends[i]->name, "", "", "", Table::num(seconds_all[i] * 1e3),
               Table::num(flops_all / seconds_all[i] / 1e9),
               Table::num(flops_all / seconds_all[i] / 1e9 / peak)});
  if (!o.json)
    std::printf("gemm: fp32, %d thread(s), %s kernels for eigen, peak %.1f GFLOP/s (%s FMA loop)\n",
                o.threads, kernels::isa_kernels().name, peak, fma_isa().c_str());
  table.print(o.json);
  return 0;
}

}  // namespace zrt::bench
