#include "zrt/model_zoo/layers/linear.h"

#include "zrt/kernels/nn/activation.h"
#include "zrt/kernels/nn/gemm.h"
#include "zrt/kernels/nn/gemm_epilogue.h"
#include "zrt/kernels/ops/fill.h"

namespace zrt::model_zoo {

using kernels::gemm;

Linear::Linear(Param weight, std::optional<Param> bias, WeightLayout layout)
    : weight_(std::move(weight)), bias_(std::move(bias)), layout_(layout) {
  const Tensor& w = weight_.value;
  ZRT_CHECK_ARG(w.dim() == 2, "Linear: weight ", w.str(), " must be 2-D");
  out_ = layout_ == WeightLayout::out_in ? w.size(0) : w.size(1);
  in_ = layout_ == WeightLayout::out_in ? w.size(1) : w.size(0);
  ZRT_CHECK_ARG(weight_.grad.shape() == w.shape(), "Linear: weight gradient ", weight_.grad.str(),
                " must match ", w.str());
  if (bias_) {
    ZRT_CHECK_ARG(bias_->value.numel() == out_ && bias_->grad.numel() == out_, "Linear: bias ",
                  bias_->value.str(), " and its gradient ", bias_->grad.str(), " must have ", out_,
                  " elements");
  }
}

Tensor Linear::ones(const Tensor& like, std::int64_t n, Stream stream) {
  // From the activations' allocator, filled on `stream`: no raw allocation or
  // legacy-stream work inside a step; kept and grown only when too short.
  if (ones_.numel() < n || ones_.dtype() != weight_.value.dtype() ||
      ones_.device() != like.device()) {
    ones_ = new_activation(like, {n}, weight_.value.dtype(), stream);
    kernels::fill(ones_, 1.0, stream);
  }
  return ones_.slice(0, n);
}

Tensor Linear::forward(const Tensor& x, Stream stream) {
  ZRT_CHECK_ARG(x.dim() >= 1 && x.size(-1) == in_, "Linear: input ", x.str(), " must be [..., ",
                in_, "]");
  check_input("Linear", weight_.value, x,
              "input");  // Note [A layer's input against its parameters]
  const Tensor& w = weight_.value;
  Tensor y = new_activation(x, with_last_dim(x.shape(), out_), w.dtype(), stream);
  const std::int64_t rows = y.numel() / std::max<std::int64_t>(out_, 1);
  if (bias_ && rows > 0) {
    // y = x·W + b: one epilogue GEMM, or ones[rows, 1] · b[1, out] with x·W
    // accumulated onto it (Note [GEMM epilogues]).
    kernels::gemm_bias(x, w, layout_ == WeightLayout::out_in, bias_->value, ones(x, rows, stream),
                       y, stream);
  } else {
    gemm(x, false, w, layout_ == WeightLayout::out_in, y, 1.0, 0.0, stream);
  }
  x_ = x;
  has_x_ = true;
  return y;
}

Linear::GeluOutput Linear::forward_gelu(const Tensor& x, Stream stream) {
  ZRT_CHECK_ARG(x.dim() >= 1 && x.size(-1) == in_, "Linear: input ", x.str(), " must be [..., ",
                in_, "]");
  check_input("Linear", weight_.value, x,
              "input");  // Note [A layer's input against its parameters]
  const Tensor& w = weight_.value;
  const std::int64_t rows = x.numel() / std::max<std::int64_t>(in_, 1);
  GeluOutput r;
  if (!bias_ || rows == 0 || in_ == 0) {
    r.pre = forward(x, stream);
    r.out = new_activation(r.pre, r.pre.shape(), r.pre.dtype(), stream);
    kernels::activation_forward(kernels::Activation::gelu, r.pre, r.out, stream);
    return r;
  }
  r.pre = new_activation(x, with_last_dim(x.shape(), out_), w.dtype(), stream);
  r.out = new_activation(x, with_last_dim(x.shape(), out_), w.dtype(), stream);
  kernels::gemm_bias_gelu(x, w, layout_ == WeightLayout::out_in, bias_->value,
                          ones(x, rows, stream), r.pre, r.out, stream);
  x_ = x;
  has_x_ = true;
  return r;
}

Tensor Linear::backward(const Tensor& dy, GradMode mode, Stream stream) {
  check_forward_ran("Linear", has_x_);
  ZRT_CHECK_ARG(dy.shape() == with_last_dim(x_.shape(), out_), "Linear: output gradient ", dy.str(),
                " must be ", shape_str(with_last_dim(x_.shape(), out_)));
  check_input("Linear", weight_.value, dy, "output gradient");
  const Tensor& w = weight_.value;
  const double beta = mode == GradMode::accumulate ? 1.0 : 0.0;
  Tensor dx = new_activation(dy, x_.shape(), x_.dtype(), stream);
  if (layout_ == WeightLayout::out_in) {
    gemm(dy, false, w, false, dx, 1.0, 0.0, stream);             // dx = dy·W
    gemm(dy, true, x_, false, weight_.grad, 1.0, beta, stream);  // dW = dyᵀ·x
  } else {
    gemm(dy, false, w, true, dx, 1.0, 0.0, stream);              // dx = dy·Wᵀ
    gemm(x_, true, dy, false, weight_.grad, 1.0, beta, stream);  // dW = xᵀ·dy
  }
  if (bias_) {
    const std::int64_t rows = dy.numel() / std::max<std::int64_t>(out_, 1);
    gemm(ones(dy, rows, stream).view({1, rows}), false, dy, false, bias_->grad.view({1, out_}), 1.0,
         beta, stream);  // db = 1ᵀ·dy
  }
  release();
  return dx;
}

void Linear::release() {
  x_ = Tensor();
  has_x_ = false;
}

}  // namespace zrt::model_zoo
