// fill / zero: every element of a tensor of any dtype set to one value.
#pragma once

#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// Sets every element of `dst` to `value` converted to dst's dtype (round to
// nearest even for floats; integers must be in range and whole).
void fill(const Tensor& dst, double value, Stream stream = {});
void zero(const Tensor& dst, Stream stream = {});

}  // namespace zrt::kernels
