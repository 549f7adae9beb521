// Argument checks of the model-zoo ops beyond kernels/ops/op_checks.h (which
// checks devices, freed storage and streams): the model-zoo ops also accept
// f64 (Note [Compute precision] in element.h) and integer ids.
#pragma once

#include <initializer_list>
#include <vector>

#include "zrt/kernels/ops/op_checks.h"
#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// Each tensor is f32, bf16, f16 or f64, and all have the dtype of the first
// named one (a parameter), else of the first.
void check_nn_floats(const char* op, TensorRefs tensors);
// `t` has exactly `numel` elements.
void check_numel(const char* op, const Tensor& t, std::int64_t numel);
// `t` holds integer ids (i32 or i64).
void check_ids(const char* op, const Tensor& t);
// The ids of `ids` (i32 or i64, any device) as host integers, each checked
// to be below `limit` and non-negative unless `allow_negative` (where a
// negative id means "ignored"). CUDA ids are copied to the host for this, in
// `stream`'s order: an out-of-range id must be a clear error, never a wild
// device read. CPU ids are read at once: call it from the CPU twin, which
// runs in its stream's order (Note [CPU streams]).
std::vector<std::int64_t> host_ids(const char* op, const Tensor& ids, std::int64_t limit,
                                   bool allow_negative, Stream stream);
// The ids of `ids` as host integers, unchecked (host_ids without its check).
std::vector<std::int64_t> read_host_ids(const char* op, const Tensor& ids, Stream stream);
// The dtype an op keeps fp statistics in for activations of dtype `t`: f64 for
// f64, f32 otherwise.
DType acc_dtype(DType t);
// Rows of `t` viewed as a matrix [numel / last dim, last dim].
std::int64_t matrix_rows(const Tensor& t);

}  // namespace zrt::kernels
