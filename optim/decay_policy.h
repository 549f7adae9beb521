// Which parameters get weight decay, and where they sit in a zero1 shard.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "zrt/kernels/ops/adamw.h"
#include "zrt/optim/flat_param/flat_param_handle.h"

namespace zrt::optim {

// Whether the parameter named `fqn` with `shape` decays.
using DecayPolicy = std::function<bool(const std::string& fqn, const Shape& shape)>;

// The GPT-2 convention: matrices (and higher) decay; biases, norm weights and
// other vectors do not.
bool decay_matrices(const std::string& fqn, const Shape& shape);

// The elements of this rank's zero1 shard of `handle` that decay under
// `decays`: sorted, disjoint, adjacent runs merged. Padding never decays
// (it stays zero either way).
std::vector<kernels::ElementRange> shard_decay_ranges(const FlatParamHandle& handle,
                                                      const DecayPolicy& decays);

}  // namespace zrt::optim
