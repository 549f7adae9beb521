// flatten / unflatten: the FlatParameter layout. Parts are copied into one
// flat buffer at given element offsets; alignment gaps between them and the
// tail padding after the last are zeroed, so padding never holds stale bits
// that would reach a norm or a collective.
#pragma once

#include <cstdint>
#include <span>

#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// flat[offsets[k] : offsets[k] + parts[k].numel()) = parts[k] (cast to flat's
// dtype, round to nearest even); every other element of `flat` = 0. Offsets
// must be increasing, the parts must not overlap and must fit in `flat`.
void flatten_into(const Tensor& flat, std::span<const Tensor> parts,
                  std::span<const std::int64_t> offsets, Stream stream = {});

// The inverse: parts[k] = flat[offsets[k] : offsets[k] + parts[k].numel())
// (cast to each part's dtype). The padding of `flat` is not read.
void unflatten_from(std::span<const Tensor> parts, const Tensor& flat,
                    std::span<const std::int64_t> offsets, Stream stream = {});

}  // namespace zrt::kernels
