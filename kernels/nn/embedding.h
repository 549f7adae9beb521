// Token (+ optional position) embedding: forward gather, backward
// deterministic scatter-add into the weight gradients (Note [Deterministic
// embedding gradient] in embedding_math.h).
#pragma once

#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// ids: [..., T] i32/i64 token ids in [0, V); wte: [V, C]; wpe: [P, C] with
// P >= T, or nullptr for no position embedding; out: [..., T, C] in the
// weights' dtype. out[.., t, :] = wte[ids[.., t]] + wpe[t].
void embedding_forward(const Tensor& ids, const Tensor& wte, const Tensor* wpe, const Tensor& out,
                       Stream stream = {});

// dwte ([V, C]) and dwpe ([P, C], or nullptr) are written, or added to when
// `accumulate`, from dout ([..., T, C]).
void embedding_backward(const Tensor& ids, const Tensor& dout, const Tensor& dwte,
                        const Tensor* dwpe, bool accumulate, Stream stream = {});

}  // namespace zrt::kernels
