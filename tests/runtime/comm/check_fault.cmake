# Runs the fault program under mpirun and passes when the job failed promptly
# with a message: zrt's timeout, or Open MPI's own report of the dead rank.
include(${CMAKE_CURRENT_LIST_DIR}/mpi_job.cmake)
run_mpi_job()
if(rc EQUAL 0)
  message(FATAL_ERROR "the job exited 0 although a rank died")
endif()
if(NOT "${log}" MATCHES "timed out|exiting improperly|exited on signal|non-zero status|returned without")
  message(FATAL_ERROR "the job failed (${rc}) without a recognisable message")
endif()
fail_if_log_matches("returned without" "a collective completed without the dead rank")
