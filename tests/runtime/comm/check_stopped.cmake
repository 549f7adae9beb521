# Runs comm_fault MODE (stopped-all-reduce or stopped-split) on 2 ranks under
# mpirun: rank 1 stops inside a collective the others are past the entry of,
# in a blocking MPI call. The job must end within the mpirun limit, non-zero,
# with rank 0's timeout naming rank 1 as one that entered the collective.
include(${CMAKE_CURRENT_LIST_DIR}/mpi_job.cmake)
run_mpi_job(${MODE})
if(rc EQUAL 0 OR "${rc}" MATCHES "timeout")
  message(FATAL_ERROR "the job did not end with an error (${rc}) although rank 1 stopped")
endif()
if(MODE STREQUAL "stopped-all-reduce")
  set(want "all_reduce #[0-9]+ on group world \\(rank 0 of 2\\): timed out after 2000 ms inside MPI_Allreduce, waiting for rank 1, which entered it and did not finish it")
else()
  set(want "split #[0-9]+ on group world \\(rank 0 of 2\\): timed out after 2000 ms inside MPI_Comm_split, waiting for rank 1, which entered it and did not finish it")
endif()
if(NOT "${log}" MATCHES "${want}")
  message(FATAL_ERROR "no error matching /${want}/ (exit ${rc})")
endif()
fail_if_log_matches("returned without" "a collective completed without the stopped rank")
