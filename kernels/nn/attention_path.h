// Which kernels run causal attention: a pure function of the call's shape,
// dtype and device and of the workspace budget; see Note [Attention paths].
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "zrt/kernels/attention_dims.h"
#include "zrt/runtime/dtype.h"

namespace zrt::kernels {

// Note [Attention paths]
// ~~~~~~~~~~~~~~~~~~~~~~
// Causal attention has five implementations:
//   cpu_blocked  the CPU twin (Note [Blocked CPU attention]): per (batch,
//                head) and query block, GEMMs on the widened operands;
//   simple       CUDA, a thread per query or key row (the reference);
//   tiled        CUDA, tiles in shared memory with an online softmax (Note
//                [Tiled causal attention]), O(T) memory, products on CUDA cores;
//   gemm         both devices: strided-batched GEMMs on the tensor cores and
//                a causal softmax kernel between them (Note [Attention on
//                GEMMs]), with a workspace of T² scores and probabilities per
//                (batch, head) pair in flight;
//   flash        CUDA, bf16/f16 with head dims 16, 32, 64 or 128, on a GPU
//                of compute capability 8.0 or newer: tiles in shared
//                memory, products as mma.sync on the tensor cores, an
//                online softmax, O(T) memory (Note [Flash attention on
//                tensor cores]).
// choose_attention_path picks one: on the CPU cpu_blocked; on CUDA simple
// when ZRT_SIMPLE_KERNELS names attention, else gemm when one pair's
// workspace fits the budget (kAttentionWorkspaceBudget, 256 MiB: at T = 1024
// and 12 heads of bf16, 3 batch elements a round, 216 MiB: 8 take three
// rounds), else tiled.
// ZRT_ATTENTION_PATH=gemm|flash|tiled|simple|cpu_blocked (read once per process; tests use
// ScopedAttentionPath, a thread-local override) forces a path where that
// path exists: gemm on either device, tiled and simple on CUDA, flash on
// CUDA for the dtypes, head dims and GPUs it has kernels for; elsewhere it
// is ignored. flash is taken only when forced until the gpu suites and
// zrt-bench attention have measured it on a device. The gemm path runs its pairs in rounds of `pairs` (whole batch
// elements, or a group of one element's heads) so the workspace stays
// within the budget however large B·H is.
enum class AttentionPath : std::uint8_t { cpu_blocked, simple, tiled, gemm, flash };

inline constexpr std::size_t kAttentionWorkspaceBudget = std::size_t(256) << 20;

struct AttentionQuery {
  bool cuda = false;           // CUDA kernels run (or a dry run plans them: planning_cuda_kernels)
  int compute_capability = 0;  // the GPU's, 10 * major + minor; 0: not known (a dry run)
  AttentionDims dims{};
  DType dtype = DType::f32;  // the activations'
  bool simple = false;       // ZRT_SIMPLE_KERNELS names attention
  std::optional<AttentionPath> forced;
  std::size_t workspace_budget = kAttentionWorkspaceBudget;
};

struct AttentionChoice {
  AttentionPath path = AttentionPath::cpu_blocked;
  // gemm: a round's batch elements and heads (batch_per_round > 1 only with
  // every head); 0 for the other paths.
  std::int64_t batch_per_round = 0, heads_per_round = 0;
  std::size_t workspace_bytes = 0;  // gemm: scores + probabilities of one round
};

AttentionChoice choose_attention_path(const AttentionQuery& q);

// Bytes of the gemm path's workspace per (batch, head) pair: T² scores in
// the accumulation dtype and T² probabilities in `dtype`.
std::size_t attention_gemm_pair_bytes(std::int64_t seq, DType dtype);

const char* attention_path_name(AttentionPath p);
// The path a ZRT_ATTENTION_PATH value names (nullopt: none or unknown).
std::optional<AttentionPath> parse_attention_path(std::string_view value);
// The path ZRT_ATTENTION_PATH's value forces: nullopt when it is unset or
// empty, InvalidArgument naming the value when it names no path.
std::optional<AttentionPath> env_attention_path(const char* value);
// ZRT_ATTENTION_PATH's path, or this thread's ScopedAttentionPath's.
std::optional<AttentionPath> forced_attention_path();

// Forces `path` on the calling thread for its lifetime (nullopt: none, not
// even ZRT_ATTENTION_PATH's); nested overrides restore the previous one.
class ScopedAttentionPath {
 public:
  explicit ScopedAttentionPath(std::optional<AttentionPath> path);
  ~ScopedAttentionPath();
  ScopedAttentionPath(const ScopedAttentionPath&) = delete;
  ScopedAttentionPath& operator=(const ScopedAttentionPath&) = delete;

 private:
  int previous_;
};

}  // namespace zrt::kernels
