// The float64 reference of the attention tests: the simple kernels' rows
// (attention_math.h) on one thread, the forward, then the backward's query
// pass and key pass.
#pragma once

#include <cstdint>
#include <vector>

#include "zrt/kernels/nn/attention_math.h"

namespace zrt::test {

struct AttentionReference {
  std::vector<double> out, lse, dsum, dqkv;
};

inline AttentionReference attention_reference(const kernels::AttentionDims& d,
                                              const std::vector<double>& qkv,
                                              const std::vector<double>& dout) {
  const std::int64_t rows = d.batch * d.heads * d.seq;
  AttentionReference ref;
  ref.out.resize(static_cast<std::size_t>(d.batch * d.seq * d.channels));
  ref.lse.resize(static_cast<std::size_t>(rows));
  ref.dsum.resize(static_cast<std::size_t>(rows));
  ref.dqkv.resize(qkv.size());
  for (std::int64_t r = 0; r < rows; ++r)
    kernels::attention_forward_row<double, double>(d, r, qkv.data(), ref.out.data(),
                                                   ref.lse.data());
  for (std::int64_t r = 0; r < rows; ++r)
    kernels::attention_backward_query_row<double, double>(d, r, dout.data(), qkv.data(),
                                                          ref.out.data(), ref.lse.data(),
                                                          ref.dsum.data(), ref.dqkv.data());
  for (std::int64_t r = 0; r < rows; ++r)
    kernels::attention_backward_key_row<double, double>(
        d, r, dout.data(), qkv.data(), ref.lse.data(), ref.dsum.data(), ref.dqkv.data());
  return ref;
}

}  // namespace zrt::test
