// Residual connection out = a + b. Its backward hands the output gradient to
// both inputs unchanged; the caller adds the branch gradient to the skip
// gradient with forward() itself (dx = dskip + dbranch).
#pragma once

#include <utility>

#include "zrt/model_zoo/layers/layer.h"

namespace zrt::model_zoo {

class ResidualAdd {
 public:
  // a, b: same shape and dtype -> a + b (fp32 arithmetic for 16-bit types).
  Tensor forward(const Tensor& a, const Tensor& b, Stream stream = {});
  // {da, db} = {dout, dout}: the same tensor, no copy.
  std::pair<Tensor, Tensor> backward(const Tensor& dout) const { return {dout, dout}; }
};

}  // namespace zrt::model_zoo
