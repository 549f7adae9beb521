// Token (+ optional position) embedding: forward gather, backward
// deterministic scatter-add into the weight gradients (Note [Deterministic
// embedding gradient] in embedding_math.h).
#pragma once

#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// ids: [..., T] i32/i64 token ids in [0, V); wte: [V, C]; wpe: [P, C] with
// P >= T, or nullptr for no position embedding; out: [..., T, C] in the
// weights' dtype. out[.., t, :] = wte[ids[.., t]] + wpe[t].
//
// id_flag: null, or an id flag (Note [Device id checks] in id_check.h). On
// CUDA without one the ids are checked on the host (a copy and a stream
// sync; InvalidArgument naming the id and its position); with one they are
// checked on the device and a bad id is recorded there: its output row is
// wpe[t] alone (0 without wpe). The CPU twin checks on the host and throws
// either way.
void embedding_forward(const Tensor& ids, const Tensor& wte, const Tensor* wpe, const Tensor& out,
                       Stream stream = {}, const Tensor* id_flag = nullptr);

// dwte ([V, C]) and dwpe ([P, C], or nullptr) are written, or added to when
// `accumulate`, from dout ([..., T, C]). On CUDA the positions are grouped by
// token on the device (simple version, ZRT_SIMPLE_KERNELS=embedding_backward:
// on the host, with an upload and a stream sync). id_flag as for the
// forward: a bad id's position adds to no dwte row (it still adds to dwpe).
void embedding_backward(const Tensor& ids, const Tensor& dout, const Tensor& dwte,
                        const Tensor* dwpe, bool accumulate, Stream stream = {},
                        const Tensor* id_flag = nullptr);

}  // namespace zrt::kernels
