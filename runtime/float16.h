// zrt::bf16 and zrt::f16, the 16-bit float storage types, and the one
// conversion between them and f32, for host code and CUDA device code alike.
//
// Note [16-bit storage types]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A bf16 or f16 element is `zrt::bf16` / `zrt::f16`: a struct around the raw
// uint16_t, so the two formats are distinct C++ types (overloads pick the
// right conversion), layout-compatible with the device formats (CUDA's
// __nv_bfloat16 / __half) and with any other library's 16-bit types. They
// have no arithmetic: code loads an element into float with to_f32, computes
// there, and rounds the result back once with from_f32<T>. Every conversion
// in zrt goes through the functions below (tensor copies and fills, host
// reductions, the runtime ops and the model-zoo ops, on the CPU and on CUDA),
// so one element converts to the same bits everywhere. All conversions to 16
// bits round to nearest even; NaN stays NaN (made quiet: bf16 keeps the top
// of the payload, f16 the top ten bits with the quiet bit set), Inf stays
// Inf, and values past the largest finite number overflow to Inf as IEEE 754
// specifies. f64 converts through f32 (two roundings, as a double → float
// cast followed by this one).
// The conversions are integer operations plus one exact multiplication
// (f16 subnormals), nothing a compiler may contract into a fused
// multiply-add, so they give the same bits under both of Note [Two precision
// rules] (zrt/kernels/hd.h) and may be compiled under each. On the device a
// conversion to 16 bits is the hardware's round-to-nearest-even instruction
// (a tenth of the instructions, which counts in the attention tiles), with
// NaN's bits still ours; test_tensor_gpu checks the device against the CPU
// bit for bit over every class of f32.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "zrt/runtime/host_device.h"

namespace zrt {

struct bf16 {
  std::uint16_t bits;
};
struct f16 {
  std::uint16_t bits;
};

// Whether T is one of the 16-bit float storage types.
template <class T>
inline constexpr bool is_float16_v = std::is_same_v<T, bf16> || std::is_same_v<T, f16>;

ZRT_HD inline std::uint32_t f32_as_u32(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

ZRT_HD inline float u32_as_f32(std::uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// --- bf16 ------------------------------------------------------------------

ZRT_HD inline float bf16_to_f32(std::uint16_t h) { return u32_as_f32(std::uint32_t(h) << 16); }

ZRT_HD inline std::uint16_t f32_to_bf16_rne(float f) {
  const std::uint32_t x = f32_as_u32(f);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  // The device's conversion rounds to nearest even in one instruction; it
  // differs from the arithmetic below only in NaN's bits, which the select
  // keeps ours.
  std::uint16_t rounded;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(rounded) : "f"(f));
#else
  // Adding 0x7fff plus the lowest kept bit rounds half to even; a carry out of
  // the mantissa bumps the exponent, which is also how overflow reaches Inf.
  const std::uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
#endif
  const std::uint32_t quiet_nan = (x >> 16) | 0x0040u;
  // A select rather than an early return, so CPU loops vectorise.
  return std::uint16_t((x & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

// --- f16 -------------------------------------------------------------------

ZRT_HD inline float f16_to_f32(std::uint16_t h) {
  std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return u32_as_f32(sign | 0x7f800000u | (mant << 13));  // Inf / NaN
  if (exp != 0) return u32_as_f32(sign | ((exp + 112u) << 23) | (mant << 13));
  // Zero or subnormal: mant * 2^-24 is exact in f32.
  float mag = float(mant) * 5.9604644775390625e-8f;
  return u32_as_f32(sign | f32_as_u32(mag));
}

ZRT_HD inline std::uint16_t f32_to_f16_rne(float f) {
  std::uint32_t x = f32_as_u32(f);
  std::uint16_t sign = std::uint16_t((x >> 16) & 0x8000u);
  std::uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return std::uint16_t(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));  // NaN
#if defined(__CUDA_ARCH__)
  // The device's conversion: round to nearest even, subnormals and overflow
  // to Inf included, the same bits as the arithmetic below.
  std::uint16_t h16;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h16) : "f"(f));
  return h16;
#else
  // 65520 is the midpoint between 65504 (max finite, odd mantissa) and 2^16:
  // ties go to even, i.e. to Inf.
  if (ax >= 0x477ff000u) return std::uint16_t(sign | 0x7c00u);
  std::uint32_t e = ax >> 23;
  if (e < 113) {                     // below 2^-14: an f16 subnormal (or zero)
    std::uint32_t shift = 126u - e;  // value = (mant | implicit) >> shift, in units of 2^-24
    if (shift >= 25) return sign;    // below half the smallest subnormal
    std::uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    std::uint32_t m = mant >> shift;
    std::uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (m & 1u))) ++m;
    return std::uint16_t(sign | m);
  }
  std::uint32_t h = ((e - 112u) << 10) | ((ax >> 13) & 0x3ffu);
  std::uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carry may reach the exponent
  return std::uint16_t(sign | h);
#endif
}

// --- overloads for templated code ------------------------------------------

ZRT_HD inline float to_f32(float x) { return x; }
ZRT_HD inline float to_f32(bf16 x) { return bf16_to_f32(x.bits); }
ZRT_HD inline float to_f32(f16 x) { return f16_to_f32(x.bits); }

template <class T>
ZRT_HD inline T from_f32(float x);
template <>
ZRT_HD inline float from_f32<float>(float x) {
  return x;
}
template <>
ZRT_HD inline bf16 from_f32<bf16>(float x) {
  return {f32_to_bf16_rne(x)};
}
template <>
ZRT_HD inline f16 from_f32<f16>(float x) {
  return {f32_to_f16_rne(x)};
}

}  // namespace zrt
