// zrt-bench ops [--device cpu|cuda] [--op SUBSTRING] [--reps R] [--json]
//
// Times every registered op (Note [One registration per op]) at its perf
// size in its first dtype (median after warm-up; CUDA events on the GPU) and
// reports its rate against a baseline measured in the same run: GB/s against
// a plain copy of the same number of bytes for memory-bound ops, GFLOP/s
// against a square GEMM of the same FLOPs and dtype for GEMM-like ones.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <string>

#include "tests/kernels/op_registry.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/suites.h"
#include "zrt/kernels/nn/gemm.h"
#include "zrt/runtime/memory/caching_allocator.h"

namespace zrt::bench {
namespace {

struct Options {
  Device device = Device::cpu();
  std::string op;  // only ops whose name contains it
  int reps = 5;
  bool json = false;
};

Options parse(int argc, char** argv) {
  Options o;
  OptionParser("ops",
               "usage: zrt-bench ops [--device cpu|cuda] [--op SUBSTRING] [--reps R] [--json]")
      .value("--device", o.device)
      .value("--op", o.op)
      .runs(o.reps, o.json)
      .parse(argc, argv);
  return o;
}

std::string dims_str(const test::OpDims& d) {
  std::string s;
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? "x" : "") + std::to_string(d[i]);
  return s;
}

}  // namespace

int bench_ops(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::string names;  // a filter that matches nothing would print an empty table
  bool any = false;
  for (const test::OpRegistration& r : test::all_registrations())
    if (!r.perf_dims.empty() && r.cost) {
      names += (names.empty() ? "" : ", ") + r.name;
      any = any || r.name.find(o.op) != std::string::npos;
    }
  ZRT_CHECK_ARG(any, "--op '", o.op, "' is in no op's name (", names, ")");
  std::optional<OwnedStream> owned;
  if (o.device.is_cuda()) owned.emplace(o.device);
  const Stream s = owned ? owned->get() : Stream{};
  // A caching allocator on the GPU, as training's: a plain cudaFree of an
  // op's scratch would wait for the device inside the timed call.
  const AllocatorPtr memory = o.device.is_cuda() ? make_caching_allocator(o.device) : nullptr;
  auto seconds = [&](const std::function<void()>& fn) {
    return median_stream_seconds(fn, o.device, s, o.reps);
  };
  const test::OpPath path{o.device.str(), o.device.is_cuda()};

  Table table(
      {"op", "case", "dtype", "ms", "rate", "unit", "baseline", "baseline_rate", "vs_baseline"});
  for (const test::OpRegistration& r : test::all_registrations()) {
    if (r.perf_dims.empty() || !r.cost || r.name.find(o.op) == std::string::npos) continue;
    const DType dt = r.dtypes.front();
    std::mt19937_64 gen(1);
    test::OpRun run(r.make_inputs(r.perf_dims, dt, gen), path, false, memory, s);
    const auto& timed = r.perf_run ? r.perf_run : r.run;
    auto call = [&] {
      run.rewind();
      timed(run, r.perf_dims, dt);
    };
    const double secs = seconds(call);
    const test::OpCost cost = r.cost(r.perf_dims, dt);
    double rate, base_rate;
    std::string unit, baseline;
    if (cost.flops > 0) {
      const auto n = std::max<std::int64_t>(64, std::llround(std::cbrt(cost.flops / 2)));
      const Tensor a = Tensor::full({n, n}, 0.5, dt, o.device, memory),
                   b = Tensor::full({n, n}, 0.25, dt, o.device, memory),
                   c = Tensor::empty({n, n}, dt, o.device, memory);
      const double gs = seconds([&] { kernels::gemm(a, false, b, false, c, 1.0, 0.0, s); });
      unit = "GFLOP_s", baseline = "gemm " + std::to_string(n) + "^3";
      rate = cost.flops / secs / 1e9, base_rate = 2.0 * double(n * n * n) / gs / 1e9;
    } else {
      const auto half = std::max<std::int64_t>(1, std::llround(cost.bytes / 2));
      const Tensor src = Tensor::full({half}, 1.0, DType::u8, o.device, memory);
      Tensor dst = Tensor::empty({half}, DType::u8, o.device, memory);
      const double cs = seconds([&] { dst.copy_(src, s); });
      unit = "GB_s", baseline = "copy " + Table::num(double(half) / 1e6, 1) + " MB";
      rate = cost.bytes / secs / 1e9, base_rate = 2.0 * double(half) / cs / 1e9;
    }
    table.add({r.name, dims_str(r.perf_dims), dtype_name(dt), Table::num(secs * 1e3),
               Table::num(rate, 2), unit, baseline, Table::num(base_rate, 2),
               Table::num(rate / base_rate, 2)});
  }
  if (!o.json) std::printf("zrt-bench ops on %s\n", o.device.str().c_str());
  table.print(o.json);
  return 0;
}

}  // namespace zrt::bench
