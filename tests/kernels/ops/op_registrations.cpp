// The runtime ops, each registered once (Note [One registration per op]):
// bit for bit between CUDA and the CPU twin, between the 16-byte packs and
// the scalar path, and across kernel threads; AdamW and the norm within
// rounding of the CPU twin. Lengths around the pack widths (4 f32, 8 bf16)
// with tails, and past one block of the norm.
#include <algorithm>
#include <cmath>

#include "tests/kernels/op_registry.h"
#include "zrt/kernels/ops/adamw.h"
#include "zrt/kernels/ops/cast.h"
#include "zrt/kernels/ops/fill.h"
#include "zrt/kernels/ops/flatten.h"
#include "zrt/kernels/ops/grad_accumulate.h"
#include "zrt/kernels/ops/norm.h"
#include "zrt/kernels/ops/quantize.h"
#include "zrt/kernels/ops/random_fill.h"
#include "zrt/kernels/ops/scale.h"

namespace zrt::test {

namespace {

const std::vector<OpDims> kLengths = {{0}, {1}, {7}, {8}, {1031}, {65537}};
const OpDims kPerfLength = {std::int64_t(1) << 24};
const std::vector<DType> kFloats = {DType::f32, DType::bf16, DType::f16};

double bytes(std::int64_t n, std::initializer_list<DType> dtypes) {
  double b = 0;
  for (DType t : dtypes) b += double(n) * double(dtype_size(t));
  return b;
}

// The cost of an op that passes over d[0] elements of t twice (a read and a
// write, or two writes).
OpCost two_passes(const OpDims& d, DType t) { return OpCost{bytes(d[0], {t, t})}; }

OpRegistration cast_to(DType to) {
  return {
      .name = std::string("cast ->") + dtype_name(to),
      .dims = kLengths,
      .dtypes = kFloats,
      .make_inputs =
          [](const OpDims& d, DType t, std::mt19937_64& g) {
            return std::vector{uniform({d[0]}, t, g, -7e4, 7e4)};
          },
      .run = [to](OpRun& r, const OpDims& d,
                  DType) { kernels::cast(r.out("dst", {d[0]}, to), r.in(0), r.stream()); },
      .cost =
          [to](const OpDims& d, DType t) {
            return OpCost{bytes(d[0], {t, to})};
          },
      .perf_dims = kPerfLength,
  };
}

// AdamW's decay ranges travel as an i64 input of {begin, end} pairs: one
// piece over the whole shard, or random pieces, most off a pack boundary.
std::vector<kernels::ElementRange> decay_ranges(const Tensor& t) {
  std::vector<kernels::ElementRange> ranges;
  const std::vector<double> v = t.to_doubles();
  for (std::size_t i = 0; i + 1 < v.size(); i += 2)
    ranges.push_back({std::int64_t(v[i]), std::int64_t(v[i + 1])});
  return ranges;
}

Tensor random_ranges(std::int64_t n, bool whole, std::mt19937_64& gen) {
  std::vector<double> v;
  if (whole) {
    v = {0, double(n)};
  } else {
    std::uniform_int_distribution<std::int64_t> step(0, std::max<std::int64_t>(n / 4, 1));
    for (std::int64_t pos = 0; pos < n;) {
      const std::int64_t begin = std::min(n, pos + step(gen)), end = std::min(n, begin + step(gen));
      v.push_back(double(begin)), v.push_back(double(end));
      pos = end + 1;
    }
  }
  return Tensor::from_doubles(v, DType::i64);
}

// dims: {n, param_out, whole-shard decay}; dtype: the gradient's. m and v
// of `moments`: bf16 rounds them stochastically (Note [bf16 AdamW moments]),
// the same bits on every path, since m and v involve no square root.
OpRegistration fused_adamw_registration(DType moments) {
  return {
      .name = moments == DType::f32 ? "fused_adamw" : "fused_adamw bf16 moments",
      .dims = {{0, 1, 0},
               {1, 1, 1},
               {7, 0, 0},
               {8, 1, 1},
               {1030, 1, 0},
               {1031, 1, 0},
               {1031, 0, 1},
               {65537, 1, 0},
               {65537, 0, 1}},
      .dtypes = {DType::f32, DType::bf16},
      .make_inputs =
          [moments](const OpDims& d, DType t, std::mt19937_64& g) {
            const Shape s = {d[0]};
            return std::vector{uniform(s, DType::f32, g), uniform(s, moments, g, -0.1, 0.1),
                               uniform(s, moments, g, 0, 0.01), uniform(s, t, g),
                               random_ranges(d[0], d[2] != 0, g)};
          },
      .run =
          [](OpRun& r, const OpDims& d, DType) {
            const kernels::AdamWHyperparams hp{
                .lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
            const Tensor p = r.inout("param", 0), m = r.inout("exp_avg", 1),
                         v = r.inout("exp_avg_sq", 2);
            std::optional<Tensor> out;
            if (d[1]) out = r.out("param_out", {d[0]}, DType::bf16);
            // A first index of each residue mod 4: a pack of four shares one
            // Philox call or straddles two (Note [bf16 AdamW moments]).
            const kernels::AdamWRounding rounding{
                .seed = 0x1234567890abcdefull, .stream = 99, .first_index = (1 << 20) + d[0] % 4};
            kernels::fused_adamw(p, m, v, r.in(3), 3, hp, decay_ranges(r.input_on_host(4)),
                                 {.grad_scale = 0.5, .param_out = out, .rounding = rounding},
                                 r.stream());
          },
      // One f32 ulp of the CPU twin (the device may contract differently in
      // the square root's neighbourhood); one bf16 ulp for the rounded copy.
      .tolerance =
          [](DType t) {
            return OpTolerance{t == DType::bf16 ? 0x1p-7 : 0x1p-22, 0};
          },
      .invariant = [](const std::vector<std::pair<std::string, Tensor>>& outs, const OpDims& d,
                      DType) -> std::string {
        if (!d[1]) return {};
        const Tensor rounded = outs[0].second.to(DType::bf16);
        for (std::int64_t i = 0; i < rounded.numel(); ++i)
          if (rounded.item(i) != outs[3].second.item(i))
            return "param_out[" + std::to_string(i) + "] is not param rounded to bf16";
        return {};
      },
      .cost =
          [moments](const OpDims& d, DType t) {
            return OpCost{bytes(d[0], {DType::f32, DType::f32, moments, moments, moments, moments,
                                       t, DType::bf16})};
          },
      .perf_dims = {std::int64_t(1) << 24, 1, 1},
  };
}

}  // namespace

std::vector<OpRegistration> ops_registrations() {
  std::vector<OpRegistration> r;
  for (DType to : kFloats) r.push_back(cast_to(to));

  r.push_back({
      .name = "cast_stochastic",
      .dims = kLengths,
      .dtypes = {DType::f32},
      .make_inputs = [](const OpDims& d, DType t,
                        std::mt19937_64& g) { return std::vector{uniform({d[0]}, t, g)}; },
      .run =
          [](OpRun& r, const OpDims& d, DType) {
            kernels::cast_stochastic(r.out("dst", {d[0]}, DType::bf16), r.in(0), 1234, r.stream());
          },
      .cost =
          [](const OpDims& d, DType t) {
            return OpCost{bytes(d[0], {t, DType::bf16})};
          },
      .perf_dims = kPerfLength,
  });

  r.push_back({
      .name = "random_fill",
      .dims = kLengths,
      .dtypes = {DType::f32},
      .make_inputs = [](const OpDims&, DType, std::mt19937_64&) { return std::vector<Tensor>{}; },
      .run =
          [](OpRun& r, const OpDims& d, DType) {
            using K = kernels::RandomInit::Kind;
            kernels::random_fill(r.out("normal", {d[0]}, DType::f32), {K::normal, 0.5, 0.02}, 1337,
                                 kernels::random_stream_of("h.0.attn.c_attn.weight"), 12345,
                                 r.stream());
            kernels::random_fill(r.out("uniform", {d[0]}, DType::f32), {K::uniform, -0.1, 0.3},
                                 ~0ull, 7, std::int64_t(1) << 33, r.stream());
          },
      .cost =
          [](const OpDims& d, DType) {
            return OpCost{bytes(d[0], {DType::f32, DType::f32})};
          },
      .perf_dims = kPerfLength,
  });

  r.push_back({
      .name = "fill",
      .dims = kLengths,
      .dtypes = std::vector<DType>(std::begin(kAllDTypes), std::end(kAllDTypes)),
      .make_inputs = [](const OpDims&, DType, std::mt19937_64&) { return std::vector<Tensor>{}; },
      .run =
          [](OpRun& r, const OpDims& d, DType t) {
            kernels::fill(r.out("filled", {d[0]}, t), 3.0, r.stream());
            kernels::zero(r.out("zeroed", {d[0]}, t), r.stream());
          },
      .cost = two_passes,
      .perf_dims = kPerfLength,
  });

  r.push_back({
      .name = "scale_",
      .dims = kLengths,
      .dtypes = kFloats,
      .make_inputs = [](const OpDims& d, DType t,
                        std::mt19937_64& g) { return std::vector{uniform({d[0]}, t, g)}; },
      .run = [](OpRun& r, const OpDims&,
                DType) { kernels::scale_(r.inout("x", 0), 0.37, r.stream()); },
      .cost = two_passes,
      .perf_dims = kPerfLength,
  });

  r.push_back({
      .name = "accumulate_grad",
      .dims = kLengths,
      .dtypes = kFloats,
      .make_inputs =
          [](const OpDims& d, DType t, std::mt19937_64& g) {
            return std::vector{uniform({d[0]}, DType::f32, g), uniform({d[0]}, t, g)};
          },
      .run = [](OpRun& r, const OpDims&,
                DType) { kernels::accumulate_grad(r.inout("acc", 0), r.in(1), 0.25f, r.stream()); },
      .cost =
          [](const OpDims& d, DType t) {
            return OpCost{bytes(d[0], {DType::f32, DType::f32, t})};
          },
      .perf_dims = kPerfLength,
  });

  // Parts of the given lengths at 16-element aligned offsets with gaps, and
  // back: the flat buffer's gaps keep their poison.
  auto offsets_of = [](const OpDims& d) {
    std::vector<std::int64_t> offsets;
    for (std::int64_t pos = 0; std::int64_t len : d)
      offsets.push_back(pos), pos += len + 16 - len % 16;
    return offsets;
  };
  auto flat_size = [offsets_of](const OpDims& d) { return offsets_of(d).back() + d.back() + 5; };
  r.push_back({
      .name = "flatten",
      .dims = {{3, 4097, 1}, {8, 7, 1031, 16}},
      .dtypes = {DType::f32, DType::bf16},
      .make_inputs =
          [flat_size](const OpDims& d, DType t, std::mt19937_64& g) {
            std::vector<Tensor> in = {uniform({flat_size(d)}, t, g)};
            for (std::int64_t len : d) in.push_back(uniform({len}, DType::f32, g));
            return in;
          },
      .run =
          [offsets_of, flat_size](OpRun& r, const OpDims& d, DType t) {
            const std::vector<std::int64_t> offsets = offsets_of(d);
            std::vector<Tensor> parts, back;
            for (std::size_t k = 0; k < d.size(); ++k) parts.push_back(r.in(k + 1));
            kernels::flatten_into(r.out("flat", {flat_size(d)}, t), parts, offsets, r.stream());
            for (std::size_t k = 0; k < d.size(); ++k)
              back.push_back(r.out("part " + std::to_string(k), {d[k]}, DType::f32));
            kernels::unflatten_from(back, r.in(0), offsets, r.stream());
          },
      .cost =
          [flat_size](const OpDims& d, DType t) {
            return OpCost{2 * bytes(flat_size(d), {DType::f32, t})};
          },
      .perf_dims = {1 << 22, 1 << 22, 1 << 22, 1 << 22},
  });

  for (DType moments : {DType::f32, DType::bf16}) r.push_back(fused_adamw_registration(moments));

  // dims: {n, position of an Inf or -1}.
  r.push_back({
      .name = "squared_norm",
      .dims = {{0, -1}, {1, -1}, {7, 3}, {1031, -1}, {65537, 60000}, {(1 << 20) + 7, -1}},
      .dtypes = kFloats,
      .make_inputs =
          [](const OpDims& d, DType t, std::mt19937_64& g) {
            Tensor x = uniform({d[0]}, t, g);
            if (d[1] >= 0) x.set_item(d[1], INFINITY);
            return std::vector{x};
          },
      .run =
          [](OpRun& r, const OpDims&, DType) {
            kernels::squared_norm_into(r.in(0), r.out("sum and flag", {2}, DType::f64), r.stream());
            const kernels::NormResult n = kernels::squared_norm(r.in(0), r.stream());
            r.record("squared_norm",
                     Tensor::from_doubles({n.squared_norm, double(n.non_finite)}, DType::f64));
            r.record("has_non_finite",
                     Tensor::from_doubles({double(kernels::has_non_finite(r.in(0), r.stream()))},
                                          DType::f64));
          },
      // f32 partial sums in another grouping on the device: 1 ulp of f32.
      .tolerance =
          [](DType) {
            return OpTolerance{0x1p-22, 0};
          },
      // Timed: the device call alone, one read of x. The other two wait
      // for the host, fixed costs about as long as three passes over 2^24
      // f32 on an H200.
      .cost = [](const OpDims& d, DType t) { return OpCost{bytes(d[0], {t})}; },
      .perf_dims = {std::int64_t(1) << 26, -1},
      .perf_run =
          [](OpRun& r, const OpDims&, DType) {
            kernels::squared_norm_into(r.in(0), r.out("sum and flag", {2}, DType::f64), r.stream());
          },
  });
  // Blockwise int8 and int4: chunks {chunk length, chunks, specials};
  // specials put a block of zeros, a NaN and an Inf in the last chunk (Note
  // [Blockwise int8 quantization], Note [Blockwise int4 quantization]). Chunk
  // lengths off the block and across several blocks, odd ones (int4 packs
  // two to a byte).
  const std::vector<OpDims> quant_dims = {{0, 1, 0},   {1, 1, 0},    {7, 3, 1},    {256, 2, 0},
                                          {300, 4, 1}, {1031, 1, 1}, {65537, 2, 0}};
  auto quant_source = [](const OpDims& d, DType t, std::mt19937_64& g) {
    Tensor x = uniform({d[0] * d[1]}, t, g, -3.0, 3.0);
    if (d[2] && x.numel() > 0) {
      const std::int64_t last = (d[1] - 1) * d[0];
      for (std::int64_t i = last; i < std::min(last + 256, x.numel()); ++i) x.set_item(i, 0.0);
      x.set_item(x.numel() - 1, NAN);
      if (d[0] > 256) x.set_item(x.numel() - 257, INFINITY);
    }
    return x;
  };
  for (const kernels::QuantFormat f : {kernels::QuantFormat::int8, kernels::QuantFormat::int4}) {
    const std::string suffix = std::string("_") + kernels::quant_format_name(f);
    // quant_source's values (f32) quantized: the input of the dequantizing ops.
    auto quantized_source = [quant_source, f](const OpDims& d, DType, std::mt19937_64& g) {
      const Tensor x = quant_source(d, DType::f32, g);
      Tensor q = Tensor::empty({kernels::quantized_bytes(x.numel(), d[0], f)}, DType::u8);
      if (x.numel() > 0) kernels::quantize(q, x, d[0], f);
      return std::vector{q};
    };
    auto quant_cost = [f](const OpDims& d, DType t) {
      return OpCost{bytes(d[0] * d[1], {t}) +
                    double(kernels::quantized_bytes(d[0] * d[1], d[0], f))};
    };
    r.push_back({
        .name = "quantize" + suffix,
        .dims = quant_dims,
        .dtypes = kFloats,
        .make_inputs = [quant_source](
                           const OpDims& d, DType t,
                           std::mt19937_64& g) { return std::vector{quant_source(d, t, g)}; },
        .run =
            [f](OpRun& r, const OpDims& d, DType) {
              const std::int64_t n = kernels::quantized_bytes(d[0] * d[1], d[0], f);
              kernels::quantize(r.out("quantized", {n}, DType::u8), r.in(0), d[0], f, r.stream());
            },
        .cost = quant_cost,
        .perf_dims = {std::int64_t(1) << 22, 4, 0},
    });
    r.push_back({
        .name = "dequantize" + suffix,
        .dims = quant_dims,
        .dtypes = kFloats,
        .make_inputs = quantized_source,
        .run =
            [f](OpRun& r, const OpDims& d, DType t) {
              kernels::dequantize(r.out("values", {d[0] * d[1]}, t), r.in(0), d[0], f, r.stream());
            },
        .cost = quant_cost,
        .perf_dims = {std::int64_t(1) << 22, 4, 0},
    });
    // A quantized reduce-scatter's sum of the chunks a rank received (avg).
    r.push_back({
        .name = "dequantize_sum" + suffix,
        .dims = quant_dims,
        .dtypes = {DType::f32},
        .make_inputs = quantized_source,
        .run =
            [f](OpRun& r, const OpDims& d, DType) {
              kernels::dequantize_sum(r.out("sum", {d[0]}, DType::f32), r.in(0), d[1],
                                      static_cast<int>(d[1]), f, r.stream());
            },
        .cost = quant_cost,
        .perf_dims = {std::int64_t(1) << 22, 4, 0},
    });
  }
  return r;
}

}  // namespace zrt::test
