// Which CUDA kernels take their fast path and which their simple reference;
// see Note [Fast kernels and their simple references].
#pragma once

#include <string_view>

namespace zrt::kernels {

// Note [Fast kernels and their simple references]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Some CUDA launchers have two versions: a fast one, and the simple one it
// replaced, kept as the reference the gpu test suites compare it with and as
// a fallback, so a run that meets a fault in a fast kernel can go on without
// it. ZRT_SIMPLE_KERNELS, a comma-separated list of FastKernel names ("all"
// for every one), picks the simple version:
//   cross_entropy  the loss mean: fixed block partials then one fixed-order
//                  pass (simple: one thread sums the rows in order);
//   layernorm      the weight/bias gradients: per-tile partial sums then a
//                  column pass (simple: a thread per feature over all rows);
//   elementwise    residual add and activations, and the runtime ops cast
//                  (stochastic too), scale, fill, grad accumulate and the
//                  fused AdamW: 16-byte vector loads and stores with a
//                  scalar tail where every pointer is 16-byte aligned, the
//                  per-element arithmetic unchanged, so the results are the
//                  same bits (simple: one element per index);
//   attention      causal attention forward and backward: strided-batched
//                  GEMMs on the tensor cores, or tiles in shared memory
//                  with an online softmax, as Note [Attention paths]
//                  chooses (simple: a thread per query or key row);
//   embedding_backward  the token grouping of Note [Deterministic embedding
//                  gradient]: a stable radix sort on the device (simple: a
//                  counting sort on the host, an upload and a stream sync);
//   gemm_epilogue  Linear's bias (and GPT's MLP GELU) in the cuBLASLt GEMM
//                  epilogue (Note [GEMM epilogues]; simple: a bias GEMM
//                  against ones, the GEMM accumulating onto it, then the
//                  GELU kernel).
// The CPU twins are unaffected. The variable is read once per process (a
// read-only cached parse); an unknown name is an InvalidArgument naming the
// accepted ones (zrt's programs check it at start). Tests compare both
// versions in one process through ScopedSimpleKernels, a thread-local
// override for the calling thread, which is the one that launches.
enum class FastKernel : unsigned {
  cross_entropy = 1u << 0,
  layernorm = 1u << 1,
  elementwise = 1u << 2,
  attention = 1u << 3,
  embedding_backward = 1u << 4,
  gemm_epilogue = 1u << 5,
};

// The FastKernel bits a ZRT_SIMPLE_KERNELS value names (nullptr: none);
// InvalidArgument naming the value for a name that is no kernel.
unsigned parse_simple_kernels(const char* value);

// True when kernel `k` should run its simple version on this thread.
bool simple_kernel(FastKernel k);

// Overrides ZRT_SIMPLE_KERNELS on the calling thread for its lifetime:
// `simple_bits` (FastKernel bits, or ~0u for all) take the simple path, the
// rest the fast one. Nested overrides restore the previous one.
class ScopedSimpleKernels {
 public:
  explicit ScopedSimpleKernels(unsigned simple_bits);
  ~ScopedSimpleKernels();
  ScopedSimpleKernels(const ScopedSimpleKernels&) = delete;
  ScopedSimpleKernels& operator=(const ScopedSimpleKernels&) = delete;

 private:
  int previous_;
};

// Note [CUDA kernels planned on the CPU]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A dry run plans a CUDA configuration on CPU tensors (Note [Dry runs]), so
// an op whose CUDA path allocates what its CPU twin does not (the workspace
// of attention's GEMM path) must choose as CUDA would. The memory plan holds
// a ScopedCudaKernelPlan on each planning thread; such ops ask
// planning_cuda_kernels() besides their tensors' device.
bool planning_cuda_kernels();

class ScopedCudaKernelPlan {
 public:
  ScopedCudaKernelPlan();
  ~ScopedCudaKernelPlan();
  ScopedCudaKernelPlan(const ScopedCudaKernelPlan&) = delete;
  ScopedCudaKernelPlan& operator=(const ScopedCudaKernelPlan&) = delete;

 private:
  bool previous_;
};

}  // namespace zrt::kernels
