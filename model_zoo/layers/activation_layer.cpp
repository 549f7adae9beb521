#include "zrt/model_zoo/layers/activation_layer.h"

#include "zrt/kernels/nn/activation.h"

namespace zrt::model_zoo {

Tensor ActivationLayer::forward(const Tensor& x, Stream stream) {
  Tensor y = new_activation(x, x.shape(), x.dtype(), stream);
  kernels::activation_forward(act_, x, y, stream);
  x_ = x;
  has_x_ = true;
  return y;
}

void ActivationLayer::record_input(const Tensor& x) {
  x_ = x;
  has_x_ = true;
}

Tensor ActivationLayer::backward(const Tensor& dy, Stream stream) {
  check_forward_ran(act_ == kernels::Activation::gelu ? "Gelu" : "Relu", has_x_);
  ZRT_CHECK_ARG(dy.shape() == x_.shape(), "activation backward: ", dy.str(), " must match ",
                x_.str());
  Tensor dx = new_activation(dy, dy.shape(), dy.dtype(), stream);
  kernels::activation_backward(act_, x_, dy, dx, stream);
  release();
  return dx;
}

void ActivationLayer::release() {
  x_ = Tensor();
  has_x_ = false;
}

}  // namespace zrt::model_zoo
