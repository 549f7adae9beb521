// Collective checks shared by the local-backend and MPI suites. Each function
// is called by every rank of `comm` and throws std::runtime_error naming the
// first wrong element (Boost.Test assertions are not thread-safe, so the
// local suite turns the exceptions into failures on the main thread).
//
// Inputs are small positive integers drawn from `seed` (every rank can
// compute every rank's input), so sums over 4 ranks are exact in every dtype
// and the expected values are exact too.
#pragma once

#include <cstdint>

#include "zrt/runtime/comm/communicator.h"

namespace zrt::test {

// Rank r's input element i for a given seed: an integer in [1, 11].
double input_value(std::uint64_t seed, int rank, std::int64_t i);

void check_all_gather(Communicator& comm, DType dtype, std::int64_t n, std::uint64_t seed,
                      Device device = Device::cpu());
void check_reduce_scatter(Communicator& comm, DType dtype, std::int64_t n, ReduceOp op,
                          std::uint64_t seed, Device device = Device::cpu());
// Chunk r of every rank's input reaches rank r, in the sender's rank order;
// an output overlapping the input is refused.
void check_all_to_all(Communicator& comm, DType dtype, std::int64_t n, std::uint64_t seed,
                      Device device = Device::cpu());
void check_all_reduce(Communicator& comm, DType dtype, std::int64_t n, ReduceOp op,
                      std::uint64_t seed, Device device = Device::cpu());
void check_broadcast(Communicator& comm, DType dtype, std::int64_t n, int root, std::uint64_t seed,
                     Device device = Device::cpu());
// all_gather_bytes with a different length on every rank (rank 1's empty).
void check_all_gather_bytes(Communicator& comm, std::uint64_t seed);
// Every collective above for one dtype and size (avg, max, min included),
// on tensors of `device`.
void check_all_collectives(Communicator& comm, DType dtype, std::int64_t n, std::uint64_t seed,
                           Device device = Device::cpu());
// Splits into (rank % 2) groups and runs collectives inside each, checking
// the members and sizes against the parent's ranks, on tensors of `device`.
void check_split(Communicator& comm, std::uint64_t seed, Device device = Device::cpu());
// make_zero_groups(world, z): sizes, ranks and collectives inside each
// group, on tensors of `device`.
void check_zero_groups(const CommPtr& world, int zero3_size, std::uint64_t seed,
                       Device device = Device::cpu());

// Note [Bytes on the link], by hand: one collective of each kind with odd
// sizes (and every broadcast root), each compared with the sent and received
// bytes worked out for this rank; barrier and all_gather_bytes add nothing;
// a group split afterwards adds to the same counters.
void check_traffic(Communicator& comm);

// Note [Collective contract]: one rank (chosen by `seed`) issues a collective
// that differs from the others' in one thing; every rank must throw CommError
// naming the collective number, the group and what each side issued (with
// the callers' labels), before any data moves, and the group must still
// work afterwards. Sizes are odd, drawn from `seed`. Needs 2 ranks or more.
enum class Mismatch { op, op_barrier, dtype, count, root, reduce_op };
inline constexpr Mismatch kAllMismatches[] = {Mismatch::op,    Mismatch::op_barrier,
                                              Mismatch::dtype, Mismatch::count,
                                              Mismatch::root,  Mismatch::reduce_op};
void check_mismatch_is_named(Communicator& comm, Mismatch what, std::uint64_t seed);

}  // namespace zrt::test
