// The kernels' element types: one TypeSet per family of kernels, for the one
// dispatch in zrt/runtime/dtype_dispatch.h (Note [One dtype dispatch]). For
// .cpp and .cu files alike (it needs neither Eigen nor CUDA).
//
// Note [Kernel element types]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Which C++ type stands for a dtype depends on the code that computes on it,
// so each family of kernels names its types in a TypeSet of As<dtype, type>
// entries and calls dispatch<Set>(dtype, op, f):
//  - StorageFloats: the runtime ops (ops/) handle f32, bf16 and f16, the
//    16-bit ones as zrt::bf16 / zrt::f16 on host and device alike (Note
//    [16-bit storage types]).
//  - NnFloats: the model-zoo ops (nn/) add f64 (Note [Compute precision] in
//    nn/element.h); their CPU twins and CUDA kernels see the same types.
//  - IdTypes: token ids and targets.
//  - WordTypes: raw words, for ops that only move bits.
#pragma once

#include <cstdint>

#include "zrt/runtime/dtype.h"
#include "zrt/runtime/dtype_dispatch.h"
#include "zrt/runtime/float16.h"

namespace zrt::kernels {

// The runtime ops' element type of each float dtype, on host and device.
using StorageFloats = TypeSet<As<DType::f32, float>, As<DType::bf16, bf16>, As<DType::f16, f16>>;

// The model-zoo ops' element type of each floating dtype, on host and device.
using NnFloats = TypeSet<As<DType::f32, float>, As<DType::bf16, bf16>, As<DType::f16, f16>,
                         As<DType::f64, double>>;

// Integer ids (tokens, targets).
using IdTypes = TypeSet<As<DType::i32, std::int32_t>, As<DType::i64, std::int64_t>>;

// Every dtype as the unsigned word of its size, for ops that write bit
// patterns without arithmetic.
using WordTypes = TypeSet<As<DType::f32, std::uint32_t>, As<DType::bf16, std::uint16_t>,
                          As<DType::f16, std::uint16_t>, As<DType::f64, std::uint64_t>,
                          As<DType::i32, std::uint32_t>, As<DType::i64, std::uint64_t>,
                          As<DType::u8, std::uint8_t>>;

}  // namespace zrt::kernels
