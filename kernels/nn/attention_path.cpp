#include "zrt/kernels/nn/attention_path.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "zrt/kernels/nn/flash_attention_math.h"
#include "zrt/kernels/nn/nn_checks.h"
#include "zrt/runtime/error.h"

namespace zrt::kernels {
namespace {

// -2: no override on this thread; -1: overridden to none; else a path.
thread_local int t_forced = -2;

std::optional<AttentionPath> env_forced() {
  static const std::optional<AttentionPath> path =
      env_attention_path(std::getenv("ZRT_ATTENTION_PATH"));
  return path;
}

bool exists_for(AttentionPath p, const AttentionQuery& q) {
  switch (p) {
    case AttentionPath::cpu_blocked:
      return !q.cuda;
    case AttentionPath::simple:
    case AttentionPath::tiled:
      return q.cuda;
    case AttentionPath::gemm:
      return true;
    case AttentionPath::flash:
      return q.cuda && (q.dtype == DType::bf16 || q.dtype == DType::f16) &&
             flash_head_dim_supported(q.dims.head_dim) &&
             (q.compute_capability == 0 || q.compute_capability >= 80);  // mma.sync m16n8k16
  }
  return false;
}

}  // namespace

std::size_t attention_gemm_pair_bytes(std::int64_t seq, DType dtype) {
  const auto square = static_cast<std::size_t>(std::max<std::int64_t>(seq, 0));
  return square * square * (dtype_size(acc_dtype(dtype)) + dtype_size(dtype));
}

AttentionChoice choose_attention_path(const AttentionQuery& q) {
  AttentionChoice c;
  const AttentionDims& d = q.dims;
  const std::size_t pair = attention_gemm_pair_bytes(d.seq, q.dtype);
  const bool fits = pair <= q.workspace_budget;
  if (q.cuda && q.simple) {
    c.path = AttentionPath::simple;
  } else if (q.forced && exists_for(*q.forced, q)) {
    c.path = *q.forced;
  } else if (q.cuda) {
    c.path = fits ? AttentionPath::gemm : AttentionPath::tiled;
  } else {
    c.path = AttentionPath::cpu_blocked;
  }
  if (c.path != AttentionPath::gemm) return c;
  // Rounds of whole batch elements where one element's heads fit, else of
  // head groups (at least one pair: a forced path may exceed the budget).
  const std::int64_t heads = std::max<std::int64_t>(d.heads, 1);
  const auto pairs = static_cast<std::int64_t>(
      pair == 0 ? heads * std::max<std::int64_t>(d.batch, 1) : q.workspace_budget / pair);
  if (pairs >= heads) {
    c.heads_per_round = heads;
    c.batch_per_round =
        std::clamp<std::int64_t>(pairs / heads, 1, std::max<std::int64_t>(d.batch, 1));
  } else {
    c.heads_per_round = std::max<std::int64_t>(pairs, 1);
    c.batch_per_round = 1;
  }
  c.workspace_bytes = pair * static_cast<std::size_t>(c.batch_per_round * c.heads_per_round);
  return c;
}

const char* attention_path_name(AttentionPath p) {
  switch (p) {
    case AttentionPath::cpu_blocked:
      return "cpu_blocked";
    case AttentionPath::simple:
      return "simple";
    case AttentionPath::tiled:
      return "tiled";
    case AttentionPath::gemm:
      return "gemm";
    case AttentionPath::flash:
      return "flash";
  }
  return "?";
}

std::optional<AttentionPath> env_attention_path(const char* value) {
  if (!value || !*value) return std::nullopt;
  const std::optional<AttentionPath> p = parse_attention_path(value);
  ZRT_CHECK_ARG(p.has_value(), "ZRT_ATTENTION_PATH='", value,
                "' is not one of gemm, flash, tiled, simple, cpu_blocked");
  return p;
}

std::optional<AttentionPath> parse_attention_path(std::string_view value) {
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
  for (AttentionPath p : {AttentionPath::cpu_blocked, AttentionPath::simple, AttentionPath::tiled,
                          AttentionPath::gemm, AttentionPath::flash})
    if (value == attention_path_name(p)) return p;
  return std::nullopt;
}

std::optional<AttentionPath> forced_attention_path() {
  if (t_forced == -1) return std::nullopt;
  if (t_forced >= 0) return static_cast<AttentionPath>(t_forced);
  return env_forced();
}

ScopedAttentionPath::ScopedAttentionPath(std::optional<AttentionPath> path) : previous_(t_forced) {
  t_forced = path ? static_cast<int>(*path) : -1;
}

ScopedAttentionPath::~ScopedAttentionPath() { t_forced = previous_; }

}  // namespace zrt::kernels
