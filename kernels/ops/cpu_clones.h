// ZRT_CPU_CLONES marks a CPU twin's hot loop for function multi-versioning.
//
// Note [CPU vector clones]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// zrt is built for the x86-64 baseline (SSE2), where the 16-bit casts and the
// 64-bit hash of stochastic rounding vectorise poorly: SSE2 has no packed
// u32->u16 narrowing and no 64-bit multiply. g++'s target_clones compiles
// the loop also for AVX2 and for x86-64-v4 (AVX-512) and picks the best one
// the CPU supports once, at load time; the element math stays the shared
// ZRT_HD functions. The results are bit-identical across clones: vector
// instructions round each element as the scalar ones do, the loops keep
// their elements independent (no reassociated sums), and -ffp-contract=off
// (Note [Two precision rules]) forbids fusing a*b+c even where FMA exists.
// Other compilers and architectures get the plain loop.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && defined(__x86_64__)
#define ZRT_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define ZRT_CPU_CLONES
#endif
