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

// Chunks of a buffer of `numel` elements; InvalidArgument unless chunk divides it.
std::int64_t chunk_count(const char* op, std::int64_t numel, std::int64_t chunk) {
  ZRT_CHECK_ARG(chunk >= 0, op, ": chunk size ", chunk, " is negative");
  if (numel == 0) return 0;
  ZRT_CHECK_ARG(chunk > 0 && numel % chunk == 0, op, ": ", numel,
                " elements do not split into chunks of ", chunk);
  return numel / chunk;
}

void check_quantized(const char* op, const Tensor& q, const Tensor& x, std::int64_t chunk) {
  check_dtype(op, q, DType::u8);
  check_kernel_float(op, x);
  const std::int64_t want = quantized_bytes(x.numel(), chunk);
  ZRT_CHECK_ARG(q.numel() == want, op, ": ", x.numel(), " elements in chunks of ", chunk,
                " quantize to ", want, " bytes, not ", q.numel());
}

// Block b (of `blocks` per chunk) of every chunk: its elements [first, end) of x.
struct BlockSpan {
  std::int64_t chunk, block, first, end;
};
BlockSpan block_span(std::int64_t index, std::int64_t blocks, std::int64_t chunk) {
  const std::int64_t c = index / blocks, b = index % blocks;
  const std::int64_t first = c * chunk + b * kQuantBlock;
  return {c, b, first, std::min(first + kQuantBlock, (c + 1) * chunk)};
}

template <class S>
void quantize_cpu(std::uint8_t* dst, const S* src, std::int64_t chunks, std::int64_t chunk) {
  const std::int64_t blocks = quant_blocks(chunk), bytes = quantized_chunk_bytes(chunk);
  parallel_for(chunks * blocks, 4, [=](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) {
      const BlockSpan s = block_span(i, blocks, chunk);
      float amax = 0.0f;
      for (std::int64_t j = s.first; j < s.end; ++j)
        amax = fmaxf(amax, quant_magnitude(to_f32(src[j])));
      const float scale = quant_scale(amax);
      std::uint8_t* q = dst + s.chunk * bytes;
      store_scale(q + 4 * s.block, scale);
      std::uint8_t* values = q + 4 * blocks + s.block * kQuantBlock;
      for (std::int64_t j = 0; j < kQuantBlock; ++j) {
        const float x = s.first + j < s.end ? to_f32(src[s.first + j]) : 0.0f;
        values[j] = static_cast<std::uint8_t>(quantize_element(x, scale));
      }
    }
  });
}

template <class D>
void dequantize_cpu(D* dst, const std::uint8_t* src, std::int64_t chunks, std::int64_t chunk) {
  const std::int64_t blocks = quant_blocks(chunk), bytes = quantized_chunk_bytes(chunk);
  parallel_for(chunks * blocks, 4, [=](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) {
      const BlockSpan s = block_span(i, blocks, chunk);
      const std::uint8_t* q = src + s.chunk * bytes;
      const float scale = load_scale(q + 4 * s.block);
      const std::uint8_t* values = q + 4 * blocks + s.block * kQuantBlock;
      for (std::int64_t j = s.first; j < s.end; ++j)
        dst[j] =
            from_f32<D>(dequantize_element(static_cast<std::int8_t>(values[j - s.first]), scale));
    }
  });
}

}  // namespace

void dequantize_sum_int8(const Tensor& dst, const Tensor& src, std::int64_t chunks, int divisor,
                         Stream stream) {
  const char* op = "dequantize_sum_int8";
  const Device device = check_operands(op, {dst, src}, stream);
  check_dtype(op, dst, DType::f32);
  check_dtype(op, src, DType::u8);
  ZRT_CHECK_ARG(chunks >= 1 && divisor >= 1, op, ": ", chunks, " chunks and divisor ", divisor,
                " (both must be positive)");
  const std::int64_t n = dst.numel();
  ZRT_CHECK_ARG(src.numel() == chunks * kernels::quantized_chunk_bytes(n), op, ": ", chunks,
                " chunks of ", n, " elements quantize to ", chunks * quantized_chunk_bytes(n),
                " bytes, not ", src.numel());
  if (n == 0) return;
  auto* d = static_cast<float*>(dst.data_ptr());
  const auto* s = static_cast<const std::uint8_t*>(src.data_ptr());
  const auto f = static_cast<float>(divisor);
  ZRT_CUDA_LAUNCH_AND_RETURN(
      op, device, cuda::launch_dequantize_sum_int8(d, s, chunks, n, f, cuda_stream(stream)));
  run_cpu_twin(stream, op, [d, s, chunks, n, f] {
    parallel_for(n, 256, [=](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t j = lo; j < hi; ++j) d[j] = dequantize_sum_element(s, chunks, n, j, f);
    });
  });
}

std::int64_t quantized_bytes(std::int64_t numel, std::int64_t chunk_numel) {
  const std::int64_t chunks = chunk_count("quantized_bytes", numel, chunk_numel);
  return chunks * quantized_chunk_bytes(chunk_numel);
}

void quantize_int8(const Tensor& dst, const Tensor& src, std::int64_t chunk_numel, Stream stream) {
  const Device device = check_operands("quantize_int8", {dst, src}, stream);
  check_quantized("quantize_int8", dst, src, chunk_numel);
  const std::int64_t chunks = chunk_count("quantize_int8", src.numel(), chunk_numel);
  if (chunks == 0) return;
  auto* d = static_cast<std::uint8_t*>(dst.data_ptr());
  ZRT_CUDA_LAUNCH_AND_RETURN("quantize_int8", device,
                             cuda::launch_quantize_int8(d, src.data_ptr(), src.dtype(), chunks,
                                                        chunk_numel, cuda_stream(stream)));
  run_cpu_twin(stream, "quantize_int8",
               [d, s = src.data_ptr(), t = src.dtype(), chunks, chunk_numel] {
                 dispatch<StorageFloats>(t, "quantize_int8", [&](auto tag) {
                   using S = typename decltype(tag)::type;
                   quantize_cpu(d, static_cast<const S*>(s), chunks, chunk_numel);
                 });
               });
}

void dequantize_int8(const Tensor& dst, const Tensor& src, std::int64_t chunk_numel,
                     Stream stream) {
  const Device device = check_operands("dequantize_int8", {dst, src}, stream);
  check_quantized("dequantize_int8", src, dst, chunk_numel);
  const std::int64_t chunks = chunk_count("dequantize_int8", dst.numel(), chunk_numel);
  if (chunks == 0) return;
  const auto* s = static_cast<const std::uint8_t*>(src.data_ptr());
  ZRT_CUDA_LAUNCH_AND_RETURN("dequantize_int8", device,
                             cuda::launch_dequantize_int8(dst.data_ptr(), dst.dtype(), s, chunks,
                                                          chunk_numel, cuda_stream(stream)));
  run_cpu_twin(stream, "dequantize_int8",
               [d = dst.data_ptr(), t = dst.dtype(), s, chunks, chunk_numel] {
                 dispatch<StorageFloats>(t, "dequantize_int8", [&](auto tag) {
                   using D = typename decltype(tag)::type;
                   dequantize_cpu(static_cast<D*>(d), s, chunks, chunk_numel);
                 });
               });
}

}  // namespace zrt::kernels
