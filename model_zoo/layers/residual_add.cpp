#include "zrt/model_zoo/layers/residual_add.h"

#include "zrt/kernels/nn/residual_add.h"

namespace zrt::model_zoo {

Tensor ResidualAdd::forward(const Tensor& a, const Tensor& b, Stream stream) {
  ZRT_CHECK_ARG(a.shape() == b.shape(), "ResidualAdd: ", a.str(), " and ", b.str(),
                " must have one shape");
  Tensor out = new_activation(a, a.shape(), a.dtype(), stream);
  kernels::residual_add(a, b, out, stream);
  return out;
}

}  // namespace zrt::model_zoo
