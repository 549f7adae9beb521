# Runs the fault program under mpirun and passes when the job failed promptly
# with a message: zrt's timeout, or Open MPI's own report of the dead rank.
execute_process(COMMAND ${MPIEXEC} --oversubscribe --allow-run-as-root -np ${NP} ${PROGRAM}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
message("${out}${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the job exited 0 although a rank died")
endif()
if(NOT "${out}${err}" MATCHES "timed out|exiting improperly|exited on signal|non-zero status|returned without")
  message(FATAL_ERROR "the job failed (${rc}) without a recognisable message")
endif()
if("${out}${err}" MATCHES "returned without")
  message(FATAL_ERROR "a collective completed without the dead rank")
endif()
