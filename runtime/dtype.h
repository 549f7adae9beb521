// Runtime element types. The C++ type of each (zrt::bf16 and zrt::f16 for the
// 16-bit floats, float16.h) and the dispatch from a DType to it live in
// dtype_dispatch.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string_view>

namespace zrt {

enum class DType : std::uint8_t { f32, bf16, f16, f64, i32, i64, u8 };

inline constexpr DType kAllDTypes[] = {DType::f32, DType::bf16, DType::f16, DType::f64,
                                       DType::i32, DType::i64,  DType::u8};

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::bf16:
    case DType::f16:
      return 2;
    case DType::u8:
      return 1;
  }
  return 0;
}

constexpr const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "f16";
    case DType::f64:
      return "f64";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::u8:
      return "u8";
  }
  return "?";
}

constexpr bool is_floating(DType t) {
  return t == DType::f32 || t == DType::bf16 || t == DType::f16 || t == DType::f64;
}

// The dtypes a model computes in: f32, bf16, f16.
constexpr bool is_compute_float(DType t) {
  return t == DType::f32 || t == DType::bf16 || t == DType::f16;
}

// Accepts zrt's names and the usual aliases ("fp32", "float32", "bfloat16", "half", ...).
std::optional<DType> parse_dtype(std::string_view name);
std::ostream& operator<<(std::ostream& os, DType t);

}  // namespace zrt
