# Runs comm_fault MODE (stopped-all-reduce or stopped-split) on 2 ranks under
# mpirun: rank 1 stops inside a collective the others are past the entry of,
# in a blocking MPI call. The job must end within the mpirun limit, non-zero,
# with rank 0's guard naming rank 1 as one that entered the collective (Note
# [Blocking MPI calls]: 2 s of timeout, 0.7 s of grace, 20 s of report window).
include(${CMAKE_CURRENT_LIST_DIR}/mpi_job.cmake)
run_mpi_job(${MODE})
if(rc EQUAL 0 OR "${rc}" MATCHES "timeout")
  message(FATAL_ERROR "the job did not end with an error (${rc}) although rank 1 stopped")
endif()
if(MODE STREQUAL "stopped-all-reduce")
  set(want "all_reduce #[0-9]+ on group world \\(rank 0 of 2\\): still inside MPI_Allreduce [0-9]+ ms after it began, past the collective timeout of 2000 ms, waiting for rank 1, which entered it and did not finish it")
else()
  set(want "split #[0-9]+ on group world \\(rank 0 of 2\\): still inside MPI_Comm_split [0-9]+ ms after it began, past the collective timeout of 2000 ms, waiting for rank 1, which entered it and did not finish it")
endif()
if(NOT "${log}" MATCHES "${want}")
  message(FATAL_ERROR "no error matching /${want}/ (exit ${rc})")
endif()
# A return after the job began to end (mpirun wakes the stopped rank) is no
# fault; comm_fault says "without the stopped rank" only of one before 2 s.
fail_if_log_matches("returned without" "a collective completed without the stopped rank")
