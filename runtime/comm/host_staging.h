// Staging of device tensors through host memory for the backends whose data
// path runs on the CPU (local, and MPI without CUDA-aware transport). On cpu
// tensors every helper is the identity, so the CPU path pays nothing.
#pragma once

#include "runtime/tensor.h"

namespace zrt {

// A host view of `t`: itself on cpu, else a host copy taken after the work
// already issued to `stream`.
Tensor host_input(const Tensor& t, Stream stream);
// Host memory to write `t`'s result into: itself on cpu, else a staging tensor.
Tensor host_output(const Tensor& t);
// Copies a staged result back into its device tensor, ordered on `stream`
// (nothing to do on cpu).
void finish_output(const Tensor& t, const Tensor& host, Stream stream);

// The first byte of `t`, or nullptr for an empty tensor (whose storage may
// hold no memory at all).
const std::byte* bytes_of(const Tensor& t);
std::byte* mutable_bytes_of(const Tensor& t);

}  // namespace zrt
