#include "zrt/model_zoo/layers/layer_norm.h"

#include "zrt/kernels/nn/layernorm.h"
#include "zrt/kernels/nn/nn_checks.h"

namespace zrt::model_zoo {

LayerNorm::LayerNorm(Param weight, Param bias, double eps)
    : weight_(std::move(weight)), bias_(std::move(bias)), eps_(eps) {
  const std::int64_t c = weight_.value.numel();
  for (const Tensor* t : {&weight_.grad, &bias_.value, &bias_.grad})
    ZRT_CHECK_ARG(t->numel() == c, "LayerNorm: ", t->str(), " must have ", c, " elements");
}

Tensor LayerNorm::forward(const Tensor& x, Stream stream) {
  ZRT_CHECK_ARG(x.dim() >= 1, "LayerNorm: input ", x.str(), " needs a feature dim");
  check_input("LayerNorm", weight_.value, x,
              "input");  // Note [A layer's input against its parameters]
  const std::int64_t rows = kernels::matrix_rows(x);
  const DType acc = kernels::acc_dtype(x.dtype());
  Tensor y = new_activation(x, x.shape(), x.dtype(), stream);
  mean_ = new_activation(x, {rows}, acc, stream);
  rstd_ = new_activation(x, {rows}, acc, stream);
  kernels::layernorm_forward(x, weight_.value, bias_.value, y, mean_, rstd_, eps_, stream);
  x_ = x;
  has_x_ = true;
  return y;
}

Tensor LayerNorm::backward(const Tensor& dy, GradMode mode, Stream stream) {
  check_forward_ran("LayerNorm", has_x_);
  ZRT_CHECK_ARG(dy.shape() == x_.shape(), "LayerNorm: output gradient ", dy.str(), " must match ",
                x_.str());
  check_input("LayerNorm", weight_.value, dy, "output gradient");
  Tensor dx = new_activation(dy, dy.shape(), dy.dtype(), stream);
  kernels::layernorm_backward(dy, x_, weight_.value, mean_, rstd_, dx, weight_.grad, bias_.grad,
                              mode == GradMode::accumulate, stream);
  release();
  return dx;
}

void LayerNorm::release() {
  x_ = mean_ = rstd_ = Tensor();
  has_x_ = false;
}

}  // namespace zrt::model_zoo
