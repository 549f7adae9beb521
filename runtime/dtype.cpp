#include "zrt/runtime/dtype.h"

#include <ostream>
#include <string>

namespace zrt {

std::optional<DType> parse_dtype(std::string_view name) {
  struct Alias {
    std::string_view name;
    DType type;
  };
  static constexpr Alias kAliases[] = {
      {"f32", DType::f32},     {"fp32", DType::f32},   {"float32", DType::f32},
      {"float", DType::f32},   {"bf16", DType::bf16},  {"bfloat16", DType::bf16},
      {"f16", DType::f16},     {"fp16", DType::f16},   {"float16", DType::f16},
      {"half", DType::f16},    {"f64", DType::f64},    {"fp64", DType::f64},
      {"float64", DType::f64}, {"double", DType::f64}, {"i32", DType::i32},
      {"int32", DType::i32},   {"i64", DType::i64},    {"int64", DType::i64},
      {"u8", DType::u8},       {"uint8", DType::u8},
  };
  for (const auto& a : kAliases)
    if (a.name == name) return a.type;
  return std::nullopt;
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

}  // namespace zrt
