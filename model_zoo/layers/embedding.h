// Token + position embedding: out[b, t] = wte[ids[b, t]] + wpe[t].
#pragma once

#include <optional>

#include "zrt/model_zoo/layers/layer.h"

namespace zrt::model_zoo {

class Embedding {
 public:
  // wte: [V', C]; wpe: [P, C] (P = the longest sequence) or none. vocab:
  // the rows in use, V <= V' (the rest are padding no id reaches: Note
  // [Padded vocabulary] in models/gpt.h); 0: all V'.
  Embedding(Param wte, std::optional<Param> wpe, std::int64_t vocab = 0);

  // ids: [B, T] (or [..., T]) i32/i64 in [0, V) -> [..., T, C]. Caches ids
  // and id_flag (null, or an id flag the forward and the backward check the
  // ids into on CUDA: Note [Device id checks] in kernels/nn/id_check.h).
  Tensor forward(const Tensor& ids, Stream stream = {}, const Tensor* id_flag = nullptr);
  // Scatter-adds dout into the table gradients (deterministic), written or
  // accumulated per `mode`. Embeddings have no input gradient.
  void backward(const Tensor& dout, GradMode mode, Stream stream = {});

 private:
  Param wte_;  // its rows in use
  std::optional<Param> wpe_;
  Tensor ids_;
  Tensor id_flag_;  // empty: none
  bool has_ids_ = false;
};

}  // namespace zrt::model_zoo
