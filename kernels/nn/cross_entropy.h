// Fused softmax cross-entropy over logits [N, V] and targets [N].
//
// Note [Cross-entropy normaliser]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The loss is Σ_rows loss_row / normaliser with the normaliser given by the
// caller, not the row count of this call: with gradient accumulation over
// micro-batches and data-parallel ranks, passing the number of targets of the
// whole global batch makes the summed gradients those of the global-batch
// mean. For a single batch, pass its number of non-ignored targets.
#pragma once

#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// logits: [..., V] floating; targets: [...] i32/i64 in [0, V) or negative
// (ignored). Writes losses ([N], per row, 0 when ignored), lse ([N], saved
// for the backward) and loss ([1] = Σ losses / normaliser, summed in row
// order), all in acc_dtype(logits.dtype()).
//
// id_flag: null, or an id flag (Note [Device id checks] in id_check.h). On
// CUDA without one the targets are checked on the host (a copy and a stream
// sync; InvalidArgument naming the target and its row); with one they are
// checked on the device, and a target >= V is recorded there and treated as
// ignored. The CPU twin checks on the host and throws either way.
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, double normaliser,
                           const Tensor& losses, const Tensor& lse, const Tensor& loss,
                           Stream stream = {}, const Tensor* id_flag = nullptr);

// dlogits = (softmax(logits) - onehot(target)) * dloss / normaliser, 0 for
// ignored rows. dlogits has the logits' shape and dtype and may be logits.
// id_flag as for the forward (a bad target's row gets 0).
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            double dloss, double normaliser, const Tensor& dlogits,
                            Stream stream = {}, const Tensor* id_flag = nullptr);

}  // namespace zrt::kernels
