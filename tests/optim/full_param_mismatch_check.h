// The program of a new user: rank 0 asks for one parameter (full_param) while
// the other ranks ask for all of them (full_params). Shared by the local-rank
// and mpirun suites.
#pragma once

#include <cstdint>

#include "zrt/runtime/comm/communicator.h"

namespace zrt::testing {

// Every rank of `world` (2 or more) builds a ZeroModule of units of odd
// sizes drawn from `seed`; rank 0 calls full_param("fc1.weight"),
// the others full_params(); then rank 0 asks for fc2, the others for fc3, two
// units of one shape. Every rank must throw CommError naming both calls
// (Note [Collective contract]), and afterwards full_params() on every rank
// must give the initial values. Throws CheckFailed otherwise.
void check_full_param_mismatch_is_named(const CommPtr& world, std::uint64_t seed);

}  // namespace zrt::testing
