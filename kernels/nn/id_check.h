// Device-side range checks of token ids and targets, read once per step
// (Note [Device id checks]).
#pragma once

#include <cstdint>

#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// Note [Device id checks]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Without help, a CUDA op range-checks its ids on the host (host_ids in
// nn_checks.h): a copy to the host and a stream sync per call, several per
// micro-batch. Instead the caller may pass an id flag: a device i64 tensor of
// kIdFlagWords elements, zeroed at the start of a step. The CUDA kernels then
// check on the device, never read or write out of bounds for a bad id (an
// embedding id outside [0, V) reads no table row and adds to no gradient
// row: its output row is the position embedding alone; a target >= V is
// treated as ignored, like a negative one) and record it in the flag:
//   word 0  how many checks failed (an id read by several ops counts in each);
//   word 1  the first bad id: the max over failures of
//           (0x7fffffff - position) << 32 | (uint32)id, position clamped to
//           2^31 - 1 and the id saturated to int32: the smallest position of
//           the step and its id, independent of the order threads ran in;
//   word 2  which kinds of id failed (IdSource bits).
// The positions are within the call's ids tensor, so with several
// micro-batches a step's "first" is the smallest position over all of them.
// The caller reads the flag at the step's one host sync, together with the
// loss, and throws throw_if_bad_ids's error. Over several ranks it gathers
// every rank's flag (no reduction op is right for all three words: the
// counts add, the keys take the max, the kinds are a union), and
// throw_if_bad_ids combines them, naming the rank of the first bad id. The CPU twins keep their host
// check and throw at once, flag or not: there the check needs no sync. When
// the flag is not given, the CUDA ops check on the host as before.
inline constexpr std::int64_t kIdFlagWords = 3;

enum class IdSource : unsigned {
  token = 1u << 0,   // embedding ids
  target = 1u << 1,  // cross-entropy targets
};

// What a read flag says.
struct BadIds {
  std::int64_t count = 0;     // failed checks; 0: all ids were in range
  std::int64_t position = 0;  // the smallest position holding a bad id
  std::int64_t id = 0;        // the id there (saturated to int32)
  unsigned sources = 0;       // IdSource bits
  int rank = 0;               // whose flag held that position (combine_id_flags)
};

// Decodes kIdFlagWords words read from a flag.
BadIds decode_id_flag(const std::int64_t* words);

// Combines `ranks` flags, kIdFlagWords words each, rank after rank: the
// counts summed, the kinds united, the first bad id the smallest position
// over the ranks (the lowest rank among equals), with its rank.
BadIds combine_id_flags(const std::int64_t* words, int ranks);

// Throws InvalidArgument "token id out of range [0, vocab)" naming the count,
// the first position, id and rank, and the kinds of id when `host_flags`
// (i64 on the CPU: one or more ranks' flags copied to the host, kIdFlagWords
// words each, rank after rank) records a bad id; returns otherwise.
void throw_if_bad_ids(const Tensor& host_flags, std::int64_t vocab);

// Checks that `flag` is an id flag: i64 with kIdFlagWords elements, on
// `device` unless that is the CPU (where a flag is not written).
void check_id_flag(const char* op, const Tensor& flag, const Device& device);

// A zeroed id flag on `device` from `allocator` (null: the default), zeroed
// in `stream`'s order (no host sync).
Tensor new_id_flag(const Device& device, AllocatorPtr allocator = nullptr, Stream stream = {});

}  // namespace zrt::kernels
