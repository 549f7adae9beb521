// The arguments of a strided-batched GEMM (batched_gemm.h), shared by the
// Tensor-level op, its CPU twin and the cuBLAS launcher.
#pragma once

#include <cstdint>

namespace zrt::kernels {

// Where the matrices of one operand sit: matrix (i, j) of the batch starts
// at element i·outer + j·inner of its tensor, rows `ld` elements apart.
struct BatchedOperand {
  std::int64_t ld = 0;
  std::int64_t outer = 0, inner = 0;
};

// The batch is outer × inner matrices (i over outer, j over inner): two
// levels of stride, so a per-(batch, head) slice of an activation [B, T, C]
// (stride T·C over the batch, head_dim over the heads) is one call.
// op(a) is [m, k], op(b) is [k, n], c is [m, n], all row-major; a stored
// matrix is op's input: [m, k] or, transposed, [k, m].
struct BatchedGemm {
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t outer = 1, inner = 1;
  BatchedOperand a, b, c;
  double alpha = 1.0, beta = 0.0;
};

}  // namespace zrt::kernels
