#include "zrt/runtime/shape.h"

#include <limits>
#include <ostream>

#include "zrt/runtime/error.h"

namespace zrt {

void Shape::push_back(std::int64_t d) {
  ZRT_CHECK_ARG(rank_ < max_dims, "shape ", shape_str(*this), " + [", d, "]: more than ", max_dims,
                " dims");
  dims_[rank_++] = d;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::ostream& operator<<(std::ostream& os, const Shape& shape) { return os << shape_str(shape); }

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) {
    ZRT_CHECK_ARG(d >= 0, "negative dimension in shape ", shape_str(shape));
    ZRT_CHECK_ARG(d == 0 || n <= std::numeric_limits<std::int64_t>::max() / d, "shape ",
                  shape_str(shape), " overflows 64-bit element count");
    n *= d;
  }
  return n;
}

}  // namespace zrt
