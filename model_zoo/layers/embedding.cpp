#include "zrt/model_zoo/layers/embedding.h"

#include "zrt/kernels/nn/embedding.h"

namespace zrt::model_zoo {

Embedding::Embedding(Param wte, std::optional<Param> wpe, std::int64_t vocab)
    : wte_(std::move(wte)), wpe_(std::move(wpe)) {
  ZRT_CHECK_ARG(wte_.value.dim() == 2 && wte_.grad.shape() == wte_.value.shape(),
                "Embedding: token table ", wte_.value.str(), " must be [V, C] like its gradient ",
                wte_.grad.str());
  ZRT_CHECK_ARG(vocab >= 0 && vocab <= wte_.value.size(0), "Embedding: vocabulary ", vocab,
                " is not within the token table ", wte_.value.str());
  // The padded rows stay out of the kernels: ids are checked against vocab,
  // and no gradient is written there.
  if (vocab > 0) wte_ = Param{wte_.value.narrow(0, vocab), wte_.grad.narrow(0, vocab)};
  if (wpe_) {
    ZRT_CHECK_ARG(wpe_->value.dim() == 2 && wpe_->grad.shape() == wpe_->value.shape() &&
                      wpe_->value.size(1) == wte_.value.size(1),
                  "Embedding: position table ", wpe_->value.str(), " must be [P, C] like ",
                  wpe_->grad.str(), " with C of ", wte_.value.str());
  }
}

Tensor Embedding::forward(const Tensor& ids, Stream stream, const Tensor* id_flag) {
  Shape shape = ids.shape();
  shape.push_back(wte_.value.size(1));
  Tensor out = new_activation(wte_.value, shape, wte_.value.dtype(), stream);
  kernels::embedding_forward(ids, wte_.value, wpe_ ? &wpe_->value : nullptr, out, stream, id_flag);
  ids_ = ids;
  id_flag_ = id_flag ? *id_flag : Tensor();
  has_ids_ = true;
  return out;
}

void Embedding::backward(const Tensor& dout, GradMode mode, Stream stream) {
  check_forward_ran("Embedding", has_ids_);
  kernels::embedding_backward(ids_, dout, wte_.grad, wpe_ ? &wpe_->grad : nullptr,
                              mode == GradMode::accumulate, stream,
                              id_flag_.numel() ? &id_flag_ : nullptr);
  ids_ = id_flag_ = Tensor();
  has_ids_ = false;
}

}  // namespace zrt::model_zoo
