#include "zrt/model_zoo/layers/causal_self_attention.h"

#include "zrt/kernels/nn/attention.h"
#include "zrt/kernels/nn/nn_checks.h"

namespace zrt::model_zoo {

CausalSelfAttention::CausalSelfAttention(Param qkv_weight, std::optional<Param> qkv_bias,
                                         Param proj_weight, std::optional<Param> proj_bias,
                                         std::int64_t n_head, WeightLayout layout)
    : qkv_(std::move(qkv_weight), std::move(qkv_bias), layout),
      proj_(std::move(proj_weight), std::move(proj_bias), layout),
      n_head_(n_head) {
  const std::int64_t c = proj_.in_features();
  ZRT_CHECK_ARG(
      proj_.out_features() == c && qkv_.in_features() == c && qkv_.out_features() == 3 * c,
      "CausalSelfAttention: qkv must map ", c, " -> ", 3 * c, " and proj ", c, " -> ", c,
      " features");
  ZRT_CHECK_ARG(n_head > 0 && c % n_head == 0, "CausalSelfAttention: ", n_head,
                " heads do not divide ", c, " channels");
}

Tensor CausalSelfAttention::forward(const Tensor& x, Stream stream) {
  ZRT_CHECK_ARG(x.dim() == 3, "CausalSelfAttention: input ", x.str(), " must be [B, T, C]");
  qkv_out_ = qkv_.forward(x, stream);
  att_out_ = new_activation(x, x.shape(), x.dtype(), stream);
  lse_ = new_activation(x, {x.size(0), n_head_, x.size(1)}, kernels::acc_dtype(x.dtype()), stream);
  kernels::attention_forward(qkv_out_, att_out_, lse_, n_head_, stream);
  has_cache_ = true;
  return proj_.forward(att_out_, stream);
}

Tensor CausalSelfAttention::backward(const Tensor& dy, GradMode mode, Stream stream) {
  check_forward_ran("CausalSelfAttention", has_cache_);
  Tensor datt = proj_.backward(dy, mode, stream);
  Tensor dqkv = new_activation(dy, qkv_out_.shape(), qkv_out_.dtype(), stream);
  kernels::attention_backward(datt, qkv_out_, att_out_, lse_, dqkv, n_head_, stream);
  qkv_out_ = att_out_ = lse_ = Tensor();
  has_cache_ = false;
  return qkv_.backward(dqkv, mode, stream);
}

void CausalSelfAttention::release() {
  qkv_.release();
  proj_.release();
  qkv_out_ = att_out_ = lse_ = Tensor();
  has_cache_ = false;
}

}  // namespace zrt::model_zoo
