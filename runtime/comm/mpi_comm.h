// The MPI backend: CPU tensors between processes (CUDA tensors are staged
// through pinned host memory). Every collective first all-gathers each rank's
// contract and checks that they agree (Note [Entry barrier] in mpi_comm.cpp);
// every wait is a non-blocking MPI_I* collective polled with MPI_Test until
// the communicator's timeout, then CommError, but all_reduce's data moves
// through the faster blocking MPI_Allreduce. bf16/f16 reductions, which MPI lacks, use
// MPI operators over zrt's host arithmetic (Note [Deterministic reduction order]).
//
// After a timeout the MPI request is left pending (MPI cannot cancel a
// collective) and the communicator refuses further collectives: the job is
// expected to end.
//
// Note [Ending after a timeout]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A collective times out when a peer never enters it: the peer is stopped
// (SIGSTOP, a debugger), stuck, or on another code path, and mpirun, which
// only notices processes that exit, keeps the job running. MPI_Finalize
// waits for every rank, so a survivor that finalised would hang there for
// as long as the peer does (and crash if it then dies). So once a collective
// of an MPI session has timed out, the session never finalises, and a tool
// ends the job with abort_mpi_job after it has printed its error: MPI_Abort
// ends every rank, the stopped one included, and mpirun exits non-zero.
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

// Ends the whole job at once with exit code `code`: MPI_Abort on
// MPI_COMM_WORLD, without MPI_Finalize (Note [Ending after a timeout]).
// Flushes stdout and stderr first. Returns false, doing nothing, where MPI is
// not initialised or already finalised, or the build has no MPI.
bool abort_mpi_job(int code);
// Whether abort_mpi_job would end a job: MPI is initialised and not finalised.
bool mpi_job_running();

}  // namespace zrt
