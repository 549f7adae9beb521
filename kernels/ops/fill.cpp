#include "zrt/kernels/ops/fill.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/dispatch.h"
#include "zrt/kernels/kernel_path.h"
#include "zrt/kernels/launch.h"
#include "zrt/kernels/ops/cpu_clones.h"
#include "zrt/kernels/ops/op_checks.h"
#ifdef ZRT_WITH_CUDA
#include "zrt/kernels/ops/fill.cuh"
#endif

namespace zrt::kernels {
namespace {

template <class Int>
std::uint64_t integer_bits(double value, DType t) {
  ZRT_CHECK_ARG(std::isfinite(value) && value == std::floor(value) &&
                    value >= double(std::numeric_limits<Int>::min()) &&
                    value <= double(std::numeric_limits<Int>::max()),
                "fill: value ", value, " is not representable in ", dtype_name(t));
  return static_cast<std::uint64_t>(static_cast<Int>(value));
}

// The element's bits in the low bytes of a 64-bit word.
std::uint64_t element_bits(double value, DType t) {
  switch (t) {
    case DType::f32:
      return f32_as_u32(static_cast<float>(value));
    case DType::bf16:
      return f32_to_bf16_rne(static_cast<float>(value));
    case DType::f16:
      return f32_to_f16_rne(static_cast<float>(value));
    case DType::f64: {
      std::uint64_t u;
      std::memcpy(&u, &value, sizeof u);
      return u;
    }
    case DType::i32:
      return static_cast<std::uint32_t>(integer_bits<std::int32_t>(value, t));
    case DType::i64:
      return integer_bits<std::int64_t>(value, t);
    case DType::u8:
      return integer_bits<std::uint8_t>(value, t);
  }
  ZRT_THROW(InvalidArgument, "fill: unknown dtype");
}

template <class U>
ZRT_CPU_CLONES void fill_chunk(U* __restrict p, U v, std::int64_t b, std::int64_t e) {
  for (std::int64_t i = b; i < e; ++i) p[i] = v;
}

// A pattern whose bytes are all equal (zero above all) is a memset, which
// libc streams past the cache for large buffers; others are a vector store
// loop (Note [CPU vector clones]).
template <class U>
void fill_cpu(void* dst, std::int64_t n, std::uint64_t pattern) {
  U* p = static_cast<U*>(dst);
  const U v = static_cast<U>(pattern);
  const auto byte = static_cast<unsigned char>(pattern);
  bool one_byte = true;
  for (std::size_t k = 1; k < sizeof(U); ++k)
    one_byte = one_byte && static_cast<unsigned char>(pattern >> (8 * k)) == byte;
  if (one_byte) {
    parallel_for(n, 64, [=](std::int64_t b, std::int64_t e) {
      std::memset(p + b, byte, static_cast<std::size_t>(e - b) * sizeof(U));
    });
  } else {
    parallel_for(n, 64, [=](std::int64_t b, std::int64_t e) { fill_chunk(p, v, b, e); });
  }
}

}  // namespace

void fill(const Tensor& dst, double value, Stream stream) {
  const Device device = check_operands("fill", {dst}, stream);
  const std::uint64_t pattern = element_bits(value, dst.dtype());
  if (dst.numel() == 0) return;
  ZRT_CUDA_LAUNCH_AND_RETURN(
      "fill", device,
      cuda::launch_fill(dst.data_ptr(), dst.dtype(), dst.numel(), pattern,
                        simple_kernel(FastKernel::elementwise), cuda_stream(stream)));
  run_cpu_twin_over(stream, "fill", {dst},
                    [p = dst.data_ptr(), n = dst.numel(), t = dst.dtype(), pattern] {
                      dispatch<WordTypes>(t, "fill", [&](auto tag) {
                        using U = typename decltype(tag)::type;
                        fill_cpu<U>(p, n, pattern);
                      });
                    });
}

void zero(const Tensor& dst, Stream stream) { fill(dst, 0.0, stream); }

}  // namespace zrt::kernels
