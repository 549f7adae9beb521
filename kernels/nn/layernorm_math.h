// Per-element LayerNorm arithmetic shared by the CPU twin and the CUDA
// kernels. Statistics are per row of C features: mean, rstd = 1/sqrt(var+eps)
// with the biased variance, as torch.nn.LayerNorm.
#pragma once

#include "zrt/kernels/nn/element.h"

namespace zrt::kernels {

template <class A>
ZRT_HD A layernorm_rstd(A sum_sq_dev, std::int64_t c, A eps) {
  return A(1) / sqrt_(sum_sq_dev / A(c) + eps);
}

template <class A>
ZRT_HD A layernorm_out(A x, A mean, A rstd, A w, A b) {
  return (x - mean) * rstd * w + b;
}

// dx for one element: g = dy * w, xhat = (x - mean) * rstd, and the row means
// of g and g * xhat.
template <class A>
ZRT_HD A layernorm_dx(A g, A xhat, A mean_g, A mean_g_xhat, A rstd) {
  return rstd * (g - mean_g - xhat * mean_g_xhat);
}

}  // namespace zrt::kernels
