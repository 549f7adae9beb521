#include "zrt/model_zoo/layers/cross_entropy.h"

#include <cmath>

#include "zrt/kernels/nn/cross_entropy.h"
#include "zrt/kernels/nn/nn_checks.h"

namespace zrt::model_zoo {

CrossEntropy::CrossEntropy(std::int64_t vocab, bool in_place) : vocab_(vocab), in_place_(in_place) {
  ZRT_CHECK_ARG(vocab >= 0, "CrossEntropy: vocabulary ", vocab, " is negative");
}

Tensor CrossEntropy::forward(const Tensor& logits, const Tensor& targets, double normaliser,
                             Stream stream, const Tensor* id_flag, double dloss) {
  ZRT_CHECK_ARG(logits.dim() >= 1, "CrossEntropy: logits ", logits.str(), " must be [..., V]");
  ZRT_CHECK_ARG(std::isfinite(dloss) && dloss != 0.0, "CrossEntropy: dloss ", dloss,
                " must be finite and not 0");
  const std::int64_t rows = kernels::matrix_rows(logits);
  const DType acc = kernels::acc_dtype(logits.dtype());
  Tensor losses = new_activation(logits, {rows}, acc, stream);
  Tensor loss = new_activation(logits, {1}, acc, stream);
  Tensor dlogits =
      in_place_ ? logits : new_activation(logits, logits.shape(), logits.dtype(), stream);
  kernels::cross_entropy_fused(logits, targets, vocab_, normaliser, dloss, losses, loss, dlogits,
                               stream, id_flag);
  dlogits_ = dlogits;
  if (!in_place_) {
    logits_ = logits;
    targets_ = targets;
    id_flag_ = id_flag ? *id_flag : Tensor();
  }
  normaliser_ = normaliser;
  dloss_ = dloss;
  has_cache_ = true;
  return loss;
}

Tensor CrossEntropy::backward(double dloss, Stream stream) {
  check_forward_ran("CrossEntropy", has_cache_);
  Tensor dlogits = dlogits_;
  if (dloss != dloss_) {
    ZRT_CHECK_ARG(!in_place_, "CrossEntropy: backward's dloss ", dloss, " is not the forward's ",
                  dloss_,
                  ", and in place the logits the gradient is taken from are gone (Batch::dloss)");
    const Tensor scratch = new_activation(logits_, {kernels::matrix_rows(logits_)},
                                          kernels::acc_dtype(logits_.dtype()), stream);
    kernels::cross_entropy_fused(logits_, targets_, vocab_, normaliser_, dloss, scratch,
                                 new_activation(logits_, {1}, scratch.dtype(), stream), dlogits,
                                 stream, id_flag_.numel() ? &id_flag_ : nullptr);
  }
  dlogits_ = logits_ = targets_ = id_flag_ = Tensor();
  has_cache_ = false;
  return dlogits;
}

}  // namespace zrt::model_zoo
