// How a model-zoo op picks its device: see Note [CUDA launch or CPU twin].
#pragma once

#include "zrt/kernels/ops/op_checks.h"

// Note [CUDA launch or CPU twin]
// Every Tensor-level op validates its operands, then runs either its CUDA
// launcher or its CPU twin. ZRT_CUDA_LAUNCH_AND_RETURN(op, device, launch)
// is the first half of that choice: for a CUDA `device` it evaluates the
// launcher call `launch` and returns from the op; in a build without CUDA
// it throws through throw_no_cuda(op) instead (the launcher, declared in a
// .cuh only that build has, is not compiled at all). For a CPU device it does
// nothing, and the op goes on to its CPU twin.
#ifdef ZRT_WITH_CUDA
#define ZRT_CUDA_LAUNCH_AND_RETURN(op, device, ...)                \
  do {                                                             \
    if ((device).is_cuda()) {                                      \
      __VA_ARGS__;                                                 \
      return;                                                      \
    }                                                              \
  } while (0)
#else
#define ZRT_CUDA_LAUNCH_AND_RETURN(op, device, ...)                \
  do {                                                             \
    if ((device).is_cuda()) ::zrt::kernels::throw_no_cuda(op);     \
  } while (0)
#endif
