// zrt-bench attention [--device cpu|cuda] [--batch B] [--seq T] [--heads H]
//                     [--head-dim D] [--dtype bf16|f16|f32|f64] [--reps R]
//                     [--simple] [--json]
//
// Times causal attention's forward and backward on each path the device has
// (Note [Attention paths]; the simple CUDA kernels only with --simple, they
// take seconds at GPT-2's sizes), median after warm-up, CUDA events on the
// GPU. The baseline, measured in the same run, is one strided-batched GEMM
// S = Q·Kᵀ over every (batch, head) pair: the tensor cores' rate on this
// shape. TFLOP/s counts the causal half of the work as flash attention's
// papers do: forward 2·B·H·T²·hd, backward 2.5× that.
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "tools/bench/bench_util.h"
#include "tools/bench/suites.h"
#include "zrt/kernels/nn/attention.h"
#include "zrt/kernels/nn/attention_path.h"
#include "zrt/kernels/nn/batched_gemm.h"
#include "zrt/kernels/nn/nn_checks.h"
#include "zrt/runtime/tensor.h"

namespace zrt::bench {
namespace {

struct Options {
  Device device = Device::cpu();
  std::int64_t batch = 8, seq = 1024, heads = 12, head_dim = 64;
  std::string dtype = "bf16";
  int reps = 10;
  bool simple = false, json = false;
};

Options parse(int argc, char** argv) {
  Options o;
  OptionParser("attention",
               "usage: zrt-bench attention [--device cpu|cuda] [--batch B] [--seq T] [--heads H] "
               "[--head-dim D] [--dtype bf16|f16|f32|f64] [--reps R] [--simple] [--json]")
      .value("--device", o.device)
      .value("--batch", o.batch)
      .value("--seq", o.seq)
      .value("--heads", o.heads)
      .value("--head-dim", o.head_dim)
      .value("--dtype", o.dtype)
      .flag("--simple", o.simple)
      .runs(o.reps, o.json)
      .parse(argc, argv);
  ZRT_CHECK_ARG(o.batch > 0 && o.seq > 0 && o.heads > 0 && o.head_dim > 0,
                "--batch, --seq, --heads and --head-dim must be positive");
  ZRT_CHECK_ARG(o.dtype == "bf16" || o.dtype == "f16" || o.dtype == "f32" || o.dtype == "f64",
                "--dtype ", o.dtype, " is not one of bf16, f16, f32, f64");
  ZRT_CHECK_ARG(!o.simple || o.device.is_cuda(),
                "--simple times the simple CUDA kernels: it needs --device cuda (the cpu has "
                "none; it times its blocked path and the GEMM path's twin)");
  return o;
}

}  // namespace

int bench_attention(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const DType t = *parse_dtype(o.dtype), at = kernels::acc_dtype(t);
  const std::int64_t b = o.batch, s = o.seq, h = o.heads, c = o.heads * o.head_dim;
  OwnedStream owned(o.device);
  const Stream st = owned.get();
  Tensor qkv = Tensor::full({b, s, 3 * c}, 0.0, t, o.device);
  // Inputs that give a non-trivial softmax: a ramp through the features.
  {
    std::vector<double> v(static_cast<std::size_t>(qkv.numel()));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37 * double(i % 9973)) * 0.5;
    qkv.copy_(Tensor::from_doubles(v, t, Device::cpu(), qkv.shape()));
  }
  Tensor dout = Tensor::full({b, s, c}, 0.01, t, o.device);
  Tensor out = Tensor::empty({b, s, c}, t, o.device), lse = Tensor::empty({b, h, s}, at, o.device);
  Tensor dqkv = Tensor::empty(qkv.shape(), t, o.device);

  const double fwd_flop = 2.0 * double(b * h) * double(s) * double(s) * double(o.head_dim);
  Table table(
      {"path", "forward_ms", "backward_ms", "total_ms", "TFLOP_s", "vs_qk_gemm", "workspace_MiB"});

  // The baseline: S = Q·Kᵀ, dense, every pair.
  kernels::BatchedGemm g;
  g.trans_b = true;
  g.m = s, g.n = s, g.k = o.head_dim;
  g.outer = b, g.inner = h;
  g.a = g.b = {3 * c, s * 3 * c, o.head_dim};
  g.c = {s, h * s * s, s * s};
  Tensor scores = Tensor::empty({b * h, s, s}, at, o.device);
  const double qk_s = median_stream_seconds(
      [&] { kernels::batched_gemm(qkv, qkv.flatten().slice(c, qkv.numel() - c), scores, g, st); },
      o.device, st, o.reps);
  const double qk_flop = 2.0 * double(b * h) * double(s) * double(s) * double(o.head_dim);
  table.add({"Q·Kᵀ batched GEMM (baseline)", "", "", Table::num(qk_s * 1e3),
             Table::num(qk_flop / qk_s / 1e12), Table::num(1.0, 2),
             Table::num(double(scores.nbytes()) / (1 << 20), 1)});
  scores = Tensor();

  std::vector<kernels::AttentionPath> paths;
  if (o.device.is_cuda()) {
    if (o.simple) paths.push_back(kernels::AttentionPath::simple);
    paths.push_back(kernels::AttentionPath::tiled);
  } else {
    paths.push_back(kernels::AttentionPath::cpu_blocked);
  }
  paths.push_back(kernels::AttentionPath::gemm);
  for (kernels::AttentionPath p : paths) {
    kernels::ScopedAttentionPath forced(p);
    const double fwd = median_stream_seconds(
        [&] { kernels::attention_forward(qkv, out, lse, h, st); }, o.device, st, o.reps);
    const double bwd = median_stream_seconds(
        [&] { kernels::attention_backward(dout, qkv, out, lse, dqkv, h, st); }, o.device, st,
        o.reps);
    kernels::AttentionQuery q;
    q.cuda = o.device.is_cuda();
    q.dims = {b, s, c, h, o.head_dim};
    q.dtype = t;
    q.forced = p;
    const std::size_t ws = kernels::choose_attention_path(q).workspace_bytes;
    table.add({kernels::attention_path_name(p), Table::num(fwd * 1e3), Table::num(bwd * 1e3),
               Table::num((fwd + bwd) * 1e3), Table::num(3.5 * fwd_flop / (fwd + bwd) / 1e12),
               Table::num((fwd + bwd) / qk_s, 2), Table::num(double(ws) / (1 << 20), 1)});
  }
  if (!o.json)
    std::printf("zrt-bench attention on %s: B %lld, T %lld, %lld heads of %lld, %s\n",
                o.device.str().c_str(), (long long)b, (long long)s, (long long)h,
                (long long)o.head_dim, dtype_name(t));
  table.print(o.json);
  return 0;
}

}  // namespace zrt::bench
