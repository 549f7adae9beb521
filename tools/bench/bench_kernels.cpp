// zrt-bench kernels [--device cpu|cuda] [--size N] [--reps R] [--json]
//
// Times each runtime kernel on N elements (median after warm-up; CUDA events
// on the GPU) and reports the bytes it moves, its GB/s, and the ratio to a
// plain copy of the same number of bytes measured in the same run.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tools/bench/bench_util.h"
#include "tools/bench/suites.h"
#include "zrt/kernels/ops/adamw.h"
#include "zrt/kernels/ops/cast.h"
#include "zrt/kernels/ops/fill.h"
#include "zrt/kernels/ops/flatten.h"
#include "zrt/kernels/ops/grad_accumulate.h"
#include "zrt/kernels/ops/norm.h"
#include "zrt/kernels/ops/scale.h"
#include "zrt/runtime/memory/caching_allocator.h"
#include "zrt/runtime/stream.h"
#include "zrt/runtime/tensor.h"

namespace zrt::bench {
namespace {

struct Options {
  Device device = Device::cpu();
  std::int64_t size = std::int64_t(1) << 24;  // 64 MiB of f32
  int reps = 10;
  bool json = false;
};

Options parse(int argc, char** argv) {
  Options o;
  OptionParser("kernels",
               "usage: zrt-bench kernels [--device cpu|cuda] [--size N] [--reps R] [--json]")
      .value("--device", o.device)
      .value("--size", o.size)
      .value("--reps", o.reps)
      .flag("--json", o.json)
      .parse(argc, argv);
  ZRT_CHECK_ARG(o.size > 0 && o.reps > 0, "kernels: --size and --reps must be positive");
  return o;
}

// Median seconds of `fn` on `stream`: CUDA events on the GPU, wall clock on the CPU.
double time_it(const std::function<void()>& fn, const Options& o, Stream stream) {
  return median_stream_seconds(fn, o.device, stream, o.reps);
}

}  // namespace

int bench_kernels(int argc, char** argv) {
  const Options o = parse(argc, argv);
  OwnedStream owned(o.device);
  const Stream s = owned.get();
  const std::int64_t n = o.size;
  // A caching allocator, as training's: an op's scratch (squared_norm's
  // partials) comes from its input's allocator, and a plain cudaFree would
  // wait for the device inside the timed call.
  const AllocatorPtr memory = make_caching_allocator(o.device);
  auto f32 = [&](double v) { return Tensor::full({n}, v, DType::f32, o.device, memory); };
  auto bf16 = [&](double v) { return Tensor::full({n}, v, DType::bf16, o.device, memory); };
  Tensor a = f32(0.5), b = f32(0.25), p = f32(0.1), m = f32(0.01), v = f32(0.001), g = f32(0.02);
  Tensor lo = bf16(0.5), glo = bf16(0.02), plo = bf16(0.0);
  // Two decayed ranges with a gap that is not (1000 elements, less in a small shard).
  const std::int64_t gap = std::min<std::int64_t>(1000, n / 4);
  const std::vector<kernels::ElementRange> decay = {{0, n / 2}, {n / 2 + gap, n}};
  std::vector<Tensor> parts;
  std::vector<std::int64_t> offsets;
  // Eight parts at 16-element aligned offsets; below 256 elements eight do
  // not fit, and one part of all n is flattened.
  const std::int64_t part_count = n >= 256 ? 8 : 1;
  for (std::int64_t k = 0, pos = 0; k < part_count; ++k) {
    const std::int64_t len = part_count == 1 ? n : (n / 8 - 16) / 16 * 16;
    parts.push_back(a.slice(k * (n / 8), std::min(len, n - k * (n / 8))));
    offsets.push_back(pos);
    pos += (parts.back().numel() + 15) / 16 * 16;
  }

  struct Kernel {
    const char* name;
    double bytes_per_element;
    std::function<void()> run;
  };
  const kernels::AdamWHyperparams hp{.lr = 1e-3, .weight_decay = 0.1};
  const std::vector<Kernel> kernels_to_time = {
      {"fill f32", 4, [&] { kernels::fill(b, 1.0, s); }},
      {"cast f32->bf16", 6, [&] { kernels::cast(lo, a, s); }},
      {"cast bf16->f32", 6, [&] { kernels::cast(b, lo, s); }},
      {"cast f32->bf16 stochastic", 6, [&] { kernels::cast_stochastic(lo, a, 7, s); }},
      {"flatten 8 parts f32->bf16", 6, [&] { kernels::flatten_into(lo, parts, offsets, s); }},
      {"accumulate f32+=bf16", 10, [&] { kernels::accumulate_grad(b, glo, 0.5f, s); }},
      {"scale f32", 8, [&] { kernels::scale_(b, 1.0, s); }},
      {"squared_norm f32", 4, [&] { kernels::squared_norm(a, s); }},
      {"adamw f32 grad, bf16 out", 30,
       [&] { kernels::fused_adamw(p, m, v, g, 10, hp, decay, {.param_out = plo}, s); }},
      {"adamw bf16 grad", 26, [&] { kernels::fused_adamw(p, m, v, glo, 10, hp, decay, {}, s); }},
  };

  const double copy_s = time_it([&] { kernels::cast(b, a, s); }, o, s);
  const double copy_gbs = 8.0 * double(n) / copy_s / 1e9;
  Table table({"kernel", "elements", "MB_moved", "ms", "GB_s", "vs_copy"});
  table.add({"copy f32 (baseline)", std::to_string(n), Table::num(8.0 * n / 1e6, 1),
             Table::num(copy_s * 1e3), Table::num(copy_gbs, 2), Table::num(1.0, 2)});
  for (const Kernel& k : kernels_to_time) {
    const double secs = time_it(k.run, o, s);
    const double bytes = k.bytes_per_element * double(n);
    const double gbs = bytes / secs / 1e9;
    table.add({k.name, std::to_string(n), Table::num(bytes / 1e6, 1), Table::num(secs * 1e3),
               Table::num(gbs, 2), Table::num(gbs / copy_gbs, 2)});
  }
  if (!o.json)
    std::printf("zrt-bench kernels on %s, %lld elements\n", o.device.str().c_str(), (long long)n);
  table.print(o.json);
  return 0;
}

}  // namespace zrt::bench
