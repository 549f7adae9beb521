#include <cstddef>
#include <cstdint>
#include <functional>
#include <tuple>
#include <unordered_map>

#include "zrt/kernels/nn/cublas_handle.cuh"
#include "zrt/kernels/nn/gemm_epilogue.cuh"
#include "zrt/runtime/cuda_check.h"

namespace zrt::kernels::cuda {
namespace {

#define ZRT_CUBLASLT_CHECK(expr)                                                                \
  do {                                                                                          \
    cublasStatus_t zrt_cublaslt_status_ = (expr);                                               \
    ZRT_CHECK_AS(::zrt::CublasError, zrt_cublaslt_status_ == CUBLAS_STATUS_SUCCESS,             \
                 "cuBLASLt error ", cublas().status_name(zrt_cublaslt_status_), " in ", #expr); \
  } while (0)

// cuBLASLt's epilogue GEMMs take the 32- and 16-bit floats.
cudaDataType_t lt_type(DType t) {
  if (t == DType::f64)
    ZRT_THROW(InvalidArgument, "gemm_bias: dtype f64 has no cuBLASLt epilogue GEMM");
  return cublas_type(t, "gemm_bias");
}

// One cached shape (Note [GEMM epilogues]).
struct PlanKey {
  int device;
  DType dtype;
  bool trans_w, gelu, tf32;
  std::int64_t m, n, k;
  std::uint32_t align;
  bool operator==(const PlanKey&) const = default;
};

struct PlanKeyHash {
  std::size_t operator()(const PlanKey& p) const noexcept {
    std::size_t h = std::hash<std::int64_t>{}(p.m);
    const auto mix = [&h](std::size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    mix(std::hash<std::int64_t>{}(p.n));
    mix(std::hash<std::int64_t>{}(p.k));
    mix(static_cast<std::size_t>(p.device) * 131 + static_cast<std::size_t>(p.dtype) * 17 +
        p.align);
    mix(static_cast<std::size_t>(p.trans_w) | static_cast<std::size_t>(p.gelu) << 1 |
        static_cast<std::size_t>(p.tf32) << 2);
    return h;
  }
};

// The matmul descriptor, the layouts of A (w), B (x) and C = D (y), and the
// algorithm the heuristic chose (found = false: none, use the simple path).
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;
};

// Per thread (Note [cuBLAS handles]): a handle per device and the plans.
struct LtCache {
  std::unordered_map<int, cublasLtHandle_t> handles;
  std::unordered_map<PlanKey, Plan, PlanKeyHash> plans;
  LtCache() = default;
  LtCache(const LtCache&) = delete;
  LtCache& operator=(const LtCache&) = delete;
  ~LtCache() {
    for (auto& [key, p] : plans) {
      if (p.d) cublas().lt_matrix_layout_destroy(p.d);
      if (p.b) cublas().lt_matrix_layout_destroy(p.b);
      if (p.a) cublas().lt_matrix_layout_destroy(p.a);
      if (p.desc) cublas().lt_matmul_desc_destroy(p.desc);
    }
    for (auto& [dev, h] : handles) cublas().lt_destroy(h);
  }
  cublasLtHandle_t handle(int device) {
    auto it = handles.find(device);
    if (it != handles.end()) return it->second;
    cublasLtHandle_t h = nullptr;
    ZRT_CUBLASLT_CHECK(cublas().lt_create(&h));
    handles.emplace(device, h);
    return h;
  }
};

template <class V>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const V& value) {
  ZRT_CUBLASLT_CHECK(cublas().lt_matmul_desc_set_attribute(desc, attr, &value, sizeof(value)));
}

// Row-major y = x·op(w) is column-major yᵀ[n, m] = op(w)ᵀ · xᵀ: A is w
// (stored column-major [k, n] when trans_w, else [n, k]), B is x stored
// [k, m], D is y stored [n, m]; the bias runs along D's n rows.
void build(Plan& p, cublasLtHandle_t h, const PlanKey& key, std::size_t workspace_bytes) {
  const cudaDataType_t t = lt_type(key.dtype);
  const auto [m, n, k] =
      std::tuple{static_cast<std::uint64_t>(key.m), static_cast<std::uint64_t>(key.n),
                 static_cast<std::uint64_t>(key.k)};
  const cublasComputeType_t compute =
      key.tf32 && key.dtype == DType::f32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  ZRT_CUBLASLT_CHECK(cublas().lt_matmul_desc_create(&p.desc, compute, CUDA_R_32F));
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, key.trans_w ? CUBLAS_OP_T : CUBLAS_OP_N);
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
           key.gelu ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_BIAS);
  // The heuristic reads the bias and aux pointers' alignment from these
  // (cublasLt.h). The plan serves every call of its key, so they stand at
  // an address aligned exactly as the key says, not at the first call's.
  const void* aligned_as_key = reinterpret_cast<const void*>(std::uintptr_t{key.align});
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, aligned_as_key);
  if (key.gelu) {
    set_desc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aligned_as_key);
    set_desc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, static_cast<std::int64_t>(n));
  }
  const std::int64_t lda = static_cast<std::int64_t>(key.trans_w ? k : n);
  ZRT_CUBLASLT_CHECK(
      cublas().lt_matrix_layout_create(&p.a, t, key.trans_w ? k : n, key.trans_w ? n : k, lda));
  ZRT_CUBLASLT_CHECK(cublas().lt_matrix_layout_create(&p.b, t, k, m, static_cast<std::int64_t>(k)));
  ZRT_CUBLASLT_CHECK(cublas().lt_matrix_layout_create(&p.d, t, n, m, static_cast<std::int64_t>(n)));

  cublasLtMatmulPreference_t pref = nullptr;
  ZRT_CUBLASLT_CHECK(cublas().lt_matmul_preference_create(&pref));
  cublasLtMatmulHeuristicResult_t result{};
  int count = 0;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  const std::uint64_t ws = workspace_bytes;
  status = cublas().lt_matmul_preference_set_attribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  for (const auto attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    if (status == CUBLAS_STATUS_SUCCESS)
      status =
          cublas().lt_matmul_preference_set_attribute(pref, attr, &key.align, sizeof(key.align));
  }
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublas().lt_matmul_algo_get_heuristic(h, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result,
                                                   &count);
  cublas().lt_matmul_preference_destroy(pref);
  // No algorithm for this shape (NOT_SUPPORTED, or none returned): the simple path.
  if (status != CUBLAS_STATUS_SUCCESS && status != CUBLAS_STATUS_NOT_SUPPORTED)
    ZRT_CUBLASLT_CHECK(status);
  p.found = status == CUBLAS_STATUS_SUCCESS && count > 0 && result.state == CUBLAS_STATUS_SUCCESS;
  if (p.found) p.algo = result.algo;
}

}  // namespace

bool launch_gemm_bias(DType dtype, bool trans_w, std::int64_t m, std::int64_t n, std::int64_t k,
                      const void* x, const void* w, const void* bias, void* y, void* pre,
                      std::uint32_t align, void* workspace, std::size_t workspace_bytes, int device,
                      bool tf32, cudaStream_t stream) {
  thread_local LtCache cache;
  cublasLtHandle_t h = cache.handle(device);
  const PlanKey key{device, dtype, trans_w, pre != nullptr, tf32 && dtype == DType::f32,
                    m,      n,     k,       align};
  auto it = cache.plans.find(key);
  if (it == cache.plans.end()) {
    it = cache.plans.emplace(key, Plan{}).first;
    try {
      build(it->second, h, key, workspace_bytes);
    } catch (...) {
      it->second.found = false;  // keep the handles for the destructor; never retry a failing shape
      throw;
    }
  }
  Plan& p = it->second;
  if (!p.found) return false;
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  if (pre)
    set_desc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, static_cast<const void*>(pre));
  const float alpha = 1.0f, beta = 0.0f;
  ZRT_CUBLASLT_CHECK(cublas().lt_matmul(h, p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.d, y, p.d,
                                        &p.algo, workspace, workspace_bytes, stream));
  return true;
}

}  // namespace zrt::kernels::cuda
