// What every rank of a group must agree on before a collective moves data,
// and the error that names each rank's collective when they do not (Note
// [Collective contract] in communicator.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include "zrt/runtime/dtype.h"

namespace zrt {

enum class ReduceOp : std::uint8_t { sum, avg, max, min };
const char* reduce_op_name(ReduceOp op);

enum class CollectiveOp : std::uint8_t {
  all_gather,
  reduce_scatter,
  all_to_all,
  all_reduce,
  broadcast,
  barrier,
  all_gather_bytes,
  split,
};
const char* collective_op_name(CollectiveOp op);  // "all_gather", ...

// One rank's description of the collective it issues. Trivially copyable and
// of one size on every rank, so a backend exchanges it as raw bytes whatever
// collective each rank is in.
struct CollectiveContract {
  static constexpr std::size_t kCallerChars = 64;
  std::uint64_t seq = 0;  // on its group
  // The elements this rank passes: all_gather, reduce_scatter and all_to_all
  // their input's, all_reduce and broadcast the tensor's; all_gather_bytes
  // its bytes (which may differ between ranks).
  std::int64_t numel = 0;
  std::int32_t root = 0;  // broadcast
  CollectiveOp op = CollectiveOp::barrier;
  DType dtype = DType::u8;
  ReduceOp reduce = ReduceOp::sum;  // all_reduce, reduce_scatter
  // The caller's label (FlightRecorder::Caller), cut to fit; NUL-terminated.
  char caller[kCallerChars] = {};
  // What a tensor collective moves where its caller names it (a flat
  // parameter, FlightRecorder::Subject): ranks that move different ones
  // disagree even at equal sizes. subject_id 0: unnamed, agrees with any.
  static constexpr std::size_t kSubjectChars = 32;
  std::uint64_t subject_id = 0;      // a hash of the whole name
  char subject[kSubjectChars] = {};  // the name, cut to fit; NUL-terminated
};
static_assert(std::is_trivially_copyable_v<CollectiveContract>);
static_assert(sizeof(CollectiveContract) == 128);  // what Note [Entry barrier] says it costs

// Whether two ranks' collectives may run together: the same op and sequence
// number, and what that op must agree on (dtype and count for tensors, the
// subject where both name one, the reduce op, the root).
bool contracts_agree(const CollectiveContract& a, const CollectiveContract& b);

// "all_gather of 4 f32 values (16 bytes) in full_param('fc1.weight')".
std::string describe_contract(const CollectiveContract& c);

// Empty when every rank's contract agrees with rank 0's; otherwise the one
// message each rank throws, naming the group, the collective and what each
// rank issued:
//   collective #12 of group 'world' does not match across ranks: rank 0
//   issued all_gather of 4 f32 values (16 bytes) in full_param('fc1.weight');
//   rank 1 issued all_gather of 262144 f32 values (1048576 bytes) in
//   full_params(); every rank must call the same collectives in the same order
std::string contract_mismatch(const std::string& group,
                              std::span<const CollectiveContract> by_rank);

}  // namespace zrt
