// Recording a bad id in an id flag from device code (Note [Device id checks]
// in id_check.h).
#pragma once

#include <cstdint>

namespace zrt::kernels::cuda {

// Records that `id` at `position` failed its range check, from any thread
// (atomics; the record does not depend on the order threads ran in).
__device__ inline void record_bad_id(unsigned long long* flag, std::int64_t position,
                                     std::int64_t id, unsigned source) {
  const std::int64_t pos = position < 0x7fffffff ? position : 0x7fffffff;
  const std::int64_t sat = id < INT32_MIN ? INT32_MIN : id > INT32_MAX ? INT32_MAX : id;
  const unsigned long long key =
      (static_cast<unsigned long long>(0x7fffffff - pos) << 32) |
      static_cast<unsigned long long>(static_cast<std::uint32_t>(static_cast<std::int32_t>(sat)));
  atomicAdd(flag, 1ull);
  atomicMax(flag + 1, key);
  atomicOr(flag + 2, static_cast<unsigned long long>(source));
}

}  // namespace zrt::kernels::cuda
