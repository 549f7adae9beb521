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

// Note [Fused classifier]
// ~~~~~~~~~~~~~~~~~~~~~~~
// The forward and the backward above read the logits three times and keep a
// second buffer of their size for the gradient. The fused classifier reads
// each row once for its statistics (on CUDA a warp per row keeps a running
// max and rescales its sum of exponentials as the max grows, so max and sum
// take one read; the CPU twin reads twice, as the forward's twin does), then
// once more to write the row's gradient, in place when dlogits is logits:
// the dloss the backward will pass must be known in the forward, as llm.c's
// fused_classifier has it (Batch::dloss: the loss scale). The per-row losses
// and their mean are the forward's (the same deterministic block sums), the
// mean stays on the device. The CPU twin's arithmetic is the forward's and
// the backward's, so its loss and gradient are theirs bit for bit; the CUDA
// kernel's lse differs from theirs by rounding (a different summation order).
//
// logits: [..., V'] floating; the classes are its first `vocab` columns
// (0: all V'); columns >= vocab are padding (Note [Padded vocabulary] in
// model_zoo/models/gpt.h): out of the log-sum-exp, gradient 0. targets as for
// the forward, in [0, vocab). Writes losses ([N], acc dtype, 0 when ignored),
// loss ([1] = Σ losses / normaliser) and dlogits (the logits' shape and
// dtype; may be logits itself) = (softmax - onehot) · dloss / normaliser in
// the first vocab columns, 0 elsewhere and in ignored rows. id_flag as for
// the forward (a bad target's row is ignored).
void cross_entropy_fused(const Tensor& logits, const Tensor& targets, std::int64_t vocab,
                         double normaliser, double dloss, const Tensor& losses, const Tensor& loss,
                         const Tensor& dlogits, Stream stream = {},
                         const Tensor* id_flag = nullptr);

}  // namespace zrt::kernels
