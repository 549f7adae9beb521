// ZRT_HD marks the per-element arithmetic shared by a GPU kernel and its CPU
// twin: `__host__ __device__` under nvcc, nothing under g++ (defined in
// zrt/runtime/host_device.h, which the runtime's 16-bit conversions use too).
//
// Note [Two precision rules]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// The same ZRT_HD arithmetic is compiled twice, by g++ for the CPU twin and
// by nvcc for the kernel. The two kernel folders differ only in whether a
// compiler may contract a*b+c into one fused multiply-add:
//  - ops/ (runtime kernels: cast, fill, AdamW, norm, ...) is bit-exact. Its
//    CPU twins are built with -ffp-contract=off and its .cu files with
//    --fmad=false (ops/CMakeLists.txt), so both sides round every operation
//    alike and a CUDA result equals its CPU twin's bit for bit: optimizer and
//    gradient state never depends on where it was computed. NaN payloads
//    aside: an operation that makes a NaN gives the canonical one on a GPU
//    and may keep an input's payload (or be negative) on x86.
//  - nn/ (model-zoo kernels: GEMM, LayerNorm, attention, ...) may contract:
//    both compilers keep their defaults, and a CUDA result matches its CPU
//    twin within rounding (cuBLAS and the warp reductions sum in other
//    orders anyway).
// The flags are per source file, so inline arithmetic must belong to one
// folder: an inline function compiled under both rules would be merged by
// the linker into one of them. The 16-bit conversions both folders share
// (zrt/runtime/float16.h) hold nothing a compiler could contract, so either
// copy gives the same bits (Note [16-bit storage types]).
#pragma once

#include "zrt/runtime/host_device.h"
