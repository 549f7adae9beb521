// Validation shared by the Tensor-level entry points of the runtime kernels:
// every operand on one device, the stream able to run there, and typed errors
// that name the op and the tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <utility>

#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

using TensorRefs = std::initializer_list<std::reference_wrapper<const Tensor>>;

// Checks that all tensors live on one device, that none has freed storage,
// and that `stream` is the CPU stream or a CUDA stream of that device (the
// CPU stream with CUDA tensors means CUDA's default stream). Returns the
// device. Throws InvalidArgument (InvalidState for freed storage).
Device check_operands(const char* op, TensorRefs tensors, Stream stream);

// `out` shares no memory with `in` (an output written while the op still
// reads its input), or, where `in_place` allows, is exactly `in`.
void check_apart(const char* op, const Tensor& out, const char* in_name, const Tensor& in,
                 bool in_place = false);
// No two of `outputs` share memory: one would overwrite the other.
using NamedTensors =
    std::initializer_list<std::pair<const char*, std::reference_wrapper<const Tensor>>>;
void check_disjoint(const char* op, NamedTensors outputs);

void check_same_numel(const char* op, const Tensor& a, const Tensor& b);
void check_dtype(const char* op, const Tensor& t, DType expected);
// f32, bf16 or f16.
void check_kernel_float(const char* op, const Tensor& t);

}  // namespace zrt::kernels
