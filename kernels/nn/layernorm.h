// LayerNorm over the last dim with affine weight and bias (eps 1e-5 by
// default, as torch.nn.LayerNorm). Forward saves per-row mean and rstd; the
// backward gives dx and the parameter gradients. Statistics and reductions
// are fp32 (f64 for f64 tensors) and deterministic.
#pragma once

#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// x, y: [..., C]; weight, bias: [C], all one floating dtype. mean, rstd:
// [rows] (rows = x.numel() / C) in acc_dtype(x.dtype()): f32, or f64 for f64.
void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd, double eps = 1e-5,
                       Stream stream = {});

// dx is written; dweight and dbias are written, or added to when
// `accumulate_param_grads`. dx may be dy.
void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                        const Tensor& dbias, bool accumulate_param_grads, Stream stream = {});

}  // namespace zrt::kernels
