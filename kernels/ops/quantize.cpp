#include "zrt/kernels/ops/quantize.h"

#include <algorithm>

#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/dispatch.h"
#include "zrt/kernels/launch.h"
#include "zrt/kernels/ops/op_checks.h"
#include "zrt/kernels/ops/quantize_math.h"
#ifdef ZRT_WITH_CUDA
#include "zrt/kernels/ops/quantize.cuh"
#endif

namespace zrt::kernels {
namespace {

// The format's value bits, checked.
int format_bits(QuantFormat f) {
  ZRT_CHECK_ARG(f == QuantFormat::int8 || f == QuantFormat::int4,
                "quantization format is int8 or int4, not code ", static_cast<int>(f));
  return f == QuantFormat::int8 ? 8 : 4;
}

// The op's name in messages, e.g. "quantize_int4" (a literal: queued CPU
// work may name it after the call returns).
const char* op_name(QuantFormat f, const char* int8, const char* int4) {
  return format_bits(f) == 8 ? int8 : int4;
}

// Chunks of a buffer of `numel` elements; InvalidArgument unless chunk divides it.
std::int64_t chunk_count(const char* op, std::int64_t numel, std::int64_t chunk) {
  ZRT_CHECK_ARG(chunk >= 0, op, ": chunk size ", chunk, " is negative");
  if (numel == 0) return 0;
  ZRT_CHECK_ARG(chunk > 0 && numel % chunk == 0, op, ": ", numel,
                " elements do not split into chunks of ", chunk);
  return numel / chunk;
}

void check_quantized(const char* op, const Tensor& q, const Tensor& x, std::int64_t chunk,
                     QuantFormat f) {
  check_dtype(op, q, DType::u8);
  check_kernel_float(op, x);
  const std::int64_t want = quantized_bytes(x.numel(), chunk, f);
  ZRT_CHECK_ARG(q.numel() == want, op, ": ", x.numel(), " elements in chunks of ", chunk,
                " quantize to ", want, " bytes, not ", q.numel());
}

// The checked operands of quantize (q = dst, x = src) or dequantize (the
// reverse): the device, the chunk count and the format's bits.
struct QuantCall {
  Device device;
  std::int64_t chunks;
  int bits;
};
QuantCall check_quant_call(const char* op, const Tensor& q, const Tensor& x, std::int64_t chunk,
                           QuantFormat f, Stream stream) {
  const Device device = check_operands(op, {q, x}, stream);
  check_quantized(op, q, x, chunk, f);
  return {device, chunk_count(op, x.numel(), chunk), format_bits(f)};
}

// Block b (of `blocks` per chunk) of every chunk: its elements [first, end) of x.
struct BlockSpan {
  std::int64_t chunk, block, first, end;
};
template <int Bits>
BlockSpan block_span(std::int64_t index, std::int64_t blocks, std::int64_t chunk) {
  const std::int64_t c = index / blocks, b = index % blocks;
  const std::int64_t first = c * chunk + b * kQuantBlockOf<Bits>;
  return {c, b, first, std::min(first + kQuantBlockOf<Bits>, (c + 1) * chunk)};
}

template <int Bits, class S>
void quantize_cpu(std::uint8_t* dst, const S* src, std::int64_t chunks, std::int64_t chunk) {
  constexpr int kPerByte = 8 / Bits;
  const std::int64_t blocks = quant_blocks<Bits>(chunk), bytes = quantized_chunk_bytes<Bits>(chunk);
  parallel_for(chunks * blocks, 4, [=](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) {
      const BlockSpan s = block_span<Bits>(i, blocks, chunk);
      float amax = 0.0f;
      for (std::int64_t j = s.first; j < s.end; ++j)
        amax = fmaxf(amax, quant_magnitude(to_f32(src[j])));
      const float scale = quant_scale<Bits>(amax);
      std::uint8_t* q = dst + s.chunk * bytes;
      store_scale(q + 4 * s.block, scale);
      std::uint8_t* values = q + 4 * blocks + s.block * kQuantValueBytes<Bits>;
      for (std::int64_t k = 0; k < kQuantValueBytes<Bits>; ++k) {
        std::uint8_t byte = 0;
        for (int e = 0; e < kPerByte; ++e) {
          const std::int64_t j = s.first + k * kPerByte + e;
          const float x = j < s.end ? to_f32(src[j]) : 0.0f;
          byte = static_cast<std::uint8_t>(byte |
                                           quant_field<Bits>(quantize_element<Bits>(x, scale), e));
        }
        values[k] = byte;
      }
    }
  });
}

template <int Bits, class D>
void dequantize_cpu(D* dst, const std::uint8_t* src, std::int64_t chunks, std::int64_t chunk) {
  const std::int64_t blocks = quant_blocks<Bits>(chunk), bytes = quantized_chunk_bytes<Bits>(chunk);
  parallel_for(chunks * blocks, 4, [=](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) {
      const BlockSpan s = block_span<Bits>(i, blocks, chunk);
      const std::uint8_t* q = src + s.chunk * bytes;
      const std::int64_t base = s.chunk * chunk;
      for (std::int64_t j = s.first; j < s.end; ++j)
        dst[j] = from_f32<D>(dequantize_chunk_element<Bits>(q, blocks, j - base));
    }
  });
}

}  // namespace

const char* quant_format_name(QuantFormat f) { return op_name(f, "int8", "int4"); }

void dequantize_sum(const Tensor& dst, const Tensor& src, std::int64_t chunks, int divisor,
                    QuantFormat format, Stream stream) {
  const char* op = op_name(format, "dequantize_sum_int8", "dequantize_sum_int4");
  const Device device = check_operands(op, {dst, src}, stream);
  check_dtype(op, dst, DType::f32);
  check_dtype(op, src, DType::u8);
  ZRT_CHECK_ARG(chunks >= 1 && divisor >= 1, op, ": ", chunks, " chunks and divisor ", divisor,
                " (both must be positive)");
  const std::int64_t n = dst.numel();
  const std::int64_t want = chunks * quantized_bytes(n, n, format);
  ZRT_CHECK_ARG(src.numel() == want, op, ": ", chunks, " chunks of ", n, " elements quantize to ",
                want, " bytes, not ", src.numel());
  if (n == 0) return;
  auto* d = static_cast<float*>(dst.data_ptr());
  const auto* s = static_cast<const std::uint8_t*>(src.data_ptr());
  const auto f = static_cast<float>(divisor);
  const int bits = format_bits(format);
  ZRT_CUDA_LAUNCH_AND_RETURN(
      op, device, cuda::launch_dequantize_sum(d, s, chunks, n, f, bits, cuda_stream(stream)));
  run_cpu_twin_over(stream, op, {dst}, [d, s, chunks, n, f, bits] {
    with_quant_bits(bits, [&](auto b) {
      constexpr int kBits = decltype(b)::value;
      parallel_for(n, 256, [=](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t j = lo; j < hi; ++j)
          d[j] = dequantize_sum_element<kBits>(s, chunks, n, j, f);
      });
    });
  });
}

std::int64_t quantized_bytes(std::int64_t numel, std::int64_t chunk_numel, QuantFormat format) {
  const std::int64_t chunks = chunk_count("quantized_bytes", numel, chunk_numel);
  return chunks * (format_bits(format) == 8 ? quantized_chunk_bytes<8>(chunk_numel)
                                            : quantized_chunk_bytes<4>(chunk_numel));
}

void quantize(const Tensor& dst, const Tensor& src, std::int64_t chunk_numel, QuantFormat format,
              Stream stream) {
  const char* op = op_name(format, "quantize_int8", "quantize_int4");
  const QuantCall c = check_quant_call(op, dst, src, chunk_numel, format, stream);
  if (c.chunks == 0) return;
  auto* d = static_cast<std::uint8_t*>(dst.data_ptr());
  ZRT_CUDA_LAUNCH_AND_RETURN(op, c.device,
                             cuda::launch_quantize(d, src.data_ptr(), src.dtype(), c.chunks,
                                                   chunk_numel, c.bits, cuda_stream(stream)));
  run_cpu_twin_over(stream, op, {dst}, [d, s = src.data_ptr(), t = src.dtype(), c, chunk_numel] {
    with_quant_bits(c.bits, [&](auto b) {
      dispatch<StorageFloats>(t, "quantize", [&](auto tag) {
        using S = typename decltype(tag)::type;
        quantize_cpu<decltype(b)::value>(d, static_cast<const S*>(s), c.chunks, chunk_numel);
      });
    });
  });
}

void dequantize(const Tensor& dst, const Tensor& src, std::int64_t chunk_numel, QuantFormat format,
                Stream stream) {
  const char* op = op_name(format, "dequantize_int8", "dequantize_int4");
  const QuantCall c = check_quant_call(op, src, dst, chunk_numel, format, stream);
  const auto* s = static_cast<const std::uint8_t*>(src.data_ptr());
  if (c.chunks == 0) return;
  ZRT_CUDA_LAUNCH_AND_RETURN(op, c.device,
                             cuda::launch_dequantize(dst.data_ptr(), dst.dtype(), s, c.chunks,
                                                     chunk_numel, c.bits, cuda_stream(stream)));
  run_cpu_twin_over(stream, op, {dst}, [d = dst.data_ptr(), t = dst.dtype(), s, c, chunk_numel] {
    with_quant_bits(c.bits, [&](auto b) {
      dispatch<StorageFloats>(t, "dequantize", [&](auto tag) {
        using D = typename decltype(tag)::type;
        dequantize_cpu<decltype(b)::value>(static_cast<D*>(d), s, c.chunks, chunk_numel);
      });
    });
  });
}

}  // namespace zrt::kernels
