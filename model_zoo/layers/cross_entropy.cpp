#include "zrt/model_zoo/layers/cross_entropy.h"

#include "zrt/kernels/nn/cross_entropy.h"
#include "zrt/kernels/nn/nn_checks.h"

namespace zrt::model_zoo {

Tensor CrossEntropy::forward(const Tensor& logits, const Tensor& targets, double normaliser,
                             Stream stream, const Tensor* id_flag) {
  ZRT_CHECK_ARG(logits.dim() >= 1, "CrossEntropy: logits ", logits.str(), " must be [..., V]");
  const std::int64_t rows = kernels::matrix_rows(logits);
  const DType acc = kernels::acc_dtype(logits.dtype());
  Tensor losses = new_activation(logits, {rows}, acc, stream);
  lse_ = new_activation(logits, {rows}, acc, stream);
  Tensor loss = new_activation(logits, {1}, acc, stream);
  kernels::cross_entropy_forward(logits, targets, normaliser, losses, lse_, loss, stream, id_flag);
  logits_ = logits;
  id_flag_ = id_flag ? *id_flag : Tensor();
  targets_ = targets;
  normaliser_ = normaliser;
  has_cache_ = true;
  return loss;
}

Tensor CrossEntropy::backward(double dloss, Stream stream) {
  check_forward_ran("CrossEntropy", has_cache_);
  Tensor dlogits = new_activation(logits_, logits_.shape(), logits_.dtype(), stream);
  kernels::cross_entropy_backward(logits_, targets_, lse_, dloss, normaliser_, dlogits, stream,
                                   id_flag_.numel() ? &id_flag_ : nullptr);
  logits_ = targets_ = lse_ = id_flag_ = Tensor();
  has_cache_ = false;
  return dlogits;
}

}  // namespace zrt::model_zoo
