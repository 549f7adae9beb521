// The MPI backend: CPU tensors between processes (CUDA tensors are staged
// through pinned host memory). Every wait is a non-blocking MPI_I* collective
// polled with MPI_Test until the communicator's timeout, then CommError;
// all_reduce instead polls an entry barrier, then runs the faster blocking
// MPI_Allreduce (Note [Entry barrier] in mpi_comm.cpp). bf16/f16 reductions, which MPI lacks, use
// MPI operators over zrt's host arithmetic (Note [Deterministic reduction order]).
//
// After a timeout the MPI request is left pending (MPI cannot cancel a
// collective) and the communicator refuses further collectives: the job is
// expected to end.
#pragma once

#include <string>

#include "zrt/runtime/comm/communicator.h"

namespace zrt {

// A communicator over all the processes of MPI_COMM_WORLD (duplicated, so
// zrt's traffic never mixes with the application's). Initialises MPI with
// MPI_THREAD_MULTIPLE if nobody has; it is then finalised when the last
// communicator made from this call (the world and its splits) is destroyed.
// Throws InvalidState in a build without MPI.
CommPtr make_mpi_world(std::string name = "world");

}  // namespace zrt
