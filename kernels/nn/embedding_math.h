// Token + position embedding arithmetic, one output element at a time,
// shared by the CPU twin and the CUDA kernels.
//
// Note [Deterministic embedding gradient]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Many positions can hold the same token, so a scatter-add of rows would race
// (atomics) or round in the parameter dtype once per occurrence. Instead the
// positions are grouped by token (CSR: offsets[V+1] and rows[N], each
// token's positions ascending) and every gradient element sums its rows in
// that fixed order in fp32, then adds to the gradient once. Tokens that do
// not occur get 0 (or keep their value when accumulating). The CPU twin and
// the simple CUDA version (ZRT_SIMPLE_KERNELS=embedding_backward) group on
// the host (a counting sort; on CUDA an id copy, an upload and a stream
// sync); the CUDA fast version groups on the device with no host round trip:
// keys (the token; V for an id a device id flag recorded as bad, a bucket no
// gradient row reads), a stable CUB radix sort of (token, position) pairs
// with positions ascending in, so ascending within a token out, then
// offsets[v] by binary search for the first key >= v. Same groups, same
// order, so the two CUDA versions agree bit for bit. Its scratch (keys,
// positions, offsets, CUB's temporary storage) is one block from dout's
// allocator in the stream's order.
#pragma once

#include "zrt/kernels/nn/element.h"

namespace zrt::kernels {

// out[i, c] = wte[ids[i], c] + wpe[i % seq, c] (wpe may be null).
template <class T, class I, class A>
ZRT_HD void embedding_forward_element(std::int64_t idx, std::int64_t channels, std::int64_t seq,
                                      const I* ids, const T* wte, const T* wpe, T* out) {
  const std::int64_t i = idx / channels, c = idx % channels;
  A v = load<A>(wte[static_cast<std::int64_t>(ids[i]) * channels + c]);
  if (wpe) v += load<A>(wpe[(i % seq) * channels + c]);
  out[idx] = store<T>(v);
}

// dwte[v, c] (+)= Σ over the rows of token v of dout[row, c].
template <class T, class A>
ZRT_HD void token_grad_element(std::int64_t idx, std::int64_t channels, const std::int64_t* offsets,
                               const std::int64_t* rows, const T* dout, T* dwte, bool accumulate) {
  const std::int64_t v = idx / channels, c = idx % channels;
  A g = 0;
  for (std::int64_t j = offsets[v]; j < offsets[v + 1]; ++j)
    g += load<A>(dout[rows[j] * channels + c]);
  dwte[idx] = store<T>((accumulate ? load<A>(dwte[idx]) : A(0)) + g);
}

// dwpe[p, c] (+)= Σ_b dout[b*seq + p, c] for p < seq; 0 beyond.
template <class T, class A>
ZRT_HD void position_grad_element(std::int64_t idx, std::int64_t channels, std::int64_t batch,
                                  std::int64_t seq, const T* dout, T* dwpe, bool accumulate) {
  const std::int64_t p = idx / channels, c = idx % channels;
  A g = 0;
  if (p < seq)
    for (std::int64_t b = 0; b < batch; ++b) g += load<A>(dout[(b * seq + p) * channels + c]);
  dwpe[idx] = store<T>((accumulate ? load<A>(dwpe[idx]) : A(0)) + g);
}

}  // namespace zrt::kernels
