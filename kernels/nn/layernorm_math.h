// Per-element LayerNorm arithmetic shared by the CPU twin and the CUDA
// kernels. Statistics are per row of C features: mean, rstd = 1/sqrt(var+eps)
// with the biased variance, as torch.nn.LayerNorm.
#pragma once

#include "zrt/kernels/nn/element.h"

namespace zrt::kernels {

// The fast CUDA parameter gradients (Note [Fast kernels and their simple
// references]) sum dy·xhat and dy over rows in two passes: the rows split
// into layernorm_param_tiles(rows) consecutive tiles of
// layernorm_param_tile_len(rows) rows, each tile's column sums go to a
// scratch of tiles × C partials (per column: kLayerNormTileLanes threads
// over rows lo + j, lo + j + kLayerNormTileLanes, ..., then those lanes in
// order), and a column pass adds the tiles' partials in tile order. The
// order depends on rows and C alone.
inline constexpr int kLayerNormTileLanes = 8;
inline constexpr std::int64_t kLayerNormMaxTiles = 128;

// Rows per tile: about 64, more when that would take over
// kLayerNormMaxTiles tiles.
inline std::int64_t layernorm_param_tile_len(std::int64_t rows) {
  if (rows <= 0) return 1;
  std::int64_t tiles = (rows + 63) / 64;
  tiles = tiles > kLayerNormMaxTiles ? kLayerNormMaxTiles : tiles;
  return (rows + tiles - 1) / tiles;
}

// Tiles of that length to cover the rows, none empty (at least 1).
inline std::int64_t layernorm_param_tiles(std::int64_t rows) {
  const std::int64_t len = layernorm_param_tile_len(rows);
  return rows <= 0 ? 1 : (rows + len - 1) / len;
}

template <class A>
ZRT_HD A layernorm_rstd(A sum_sq_dev, std::int64_t c, A eps) {
  return A(1) / sqrt_(sum_sq_dev / A(c) + eps);
}

template <class A>
ZRT_HD A layernorm_out(A x, A mean, A rstd, A w, A b) {
  return (x - mean) * rstd * w + b;
}

// One row's term of the parameter gradients of a feature: dw += dy * xhat,
// db += dy, with xhat = (x - mean) * rstd.
template <class A>
ZRT_HD void layernorm_param_grad_add(A& dw, A& db, A dy, A x, A mean, A rstd) {
  dw += dy * (x - mean) * rstd;
  db += dy;
}

// dx for one element: g = dy * w, xhat = (x - mean) * rstd, and the row means
// of g and g * xhat.
template <class A>
ZRT_HD A layernorm_dx(A g, A xhat, A mean_g, A mean_g_xhat, A rstd) {
  return rstd * (g - mean_g - xhat * mean_g_xhat);
}

}  // namespace zrt::kernels
