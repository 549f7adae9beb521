#include "zrt/model_zoo/layers/layer.h"

namespace zrt::model_zoo {

Tensor new_activation(const Tensor& like, const Shape& shape, DType dtype, Stream stream) {
  return Tensor::empty(shape, dtype, like.device(), like.storage().allocator(), stream);
}

Shape with_last_dim(Shape shape, std::int64_t last) {
  ZRT_CHECK_ARG(!shape.empty(), "a layer input must have at least one dim");
  shape.back() = last;
  return shape;
}

void check_input(const char* layer, const Tensor& param, const Tensor& x, const char* what) {
  const std::string named = param.name().empty() ? "" : " " + param.name();
  ZRT_CHECK_ARG(x.dtype() == param.dtype(), layer, named, ": ", what, " ", shape_str(x.shape()),
                " is ", dtype_name(x.dtype()), " but the layer's parameters are ",
                dtype_name(param.dtype()), "; cast the ", what, " to ", dtype_name(param.dtype()));
  ZRT_CHECK_ARG(x.device() == param.device(), layer, named, ": ", what, " ", shape_str(x.shape()),
                " is on ", x.device(), " but the layer's parameters are on ", param.device(),
                "; move the ", what, " to ", param.device());
}

void check_forward_ran(const char* layer, bool cached) {
  ZRT_CHECK_CALL(cached, layer,
                 ": backward called without a forward since the last backward (a layer keeps "
                 "the input of its last forward only: one used twice needs a backward after "
                 "each forward, or a layer per use)");
}

}  // namespace zrt::model_zoo
