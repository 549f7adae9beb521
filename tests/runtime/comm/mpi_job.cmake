# What the mpirun checks (cmake -P) share: run_mpi_job runs PROGRAM with its
# arguments on NP ranks under MPIEXEC, 60 s at the most, shows what it
# printed and leaves the exit status in rc, its stdout in out and both
# streams in log; fail_if_log_matches fails the check on a pattern in log.
macro(run_mpi_job)
  execute_process(COMMAND ${MPIEXEC} --oversubscribe --allow-run-as-root -np ${NP} ${PROGRAM} ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  set(log "${out}${err}")
  message("${log}")
endmacro()

function(fail_if_log_matches pattern why)
  if("${log}" MATCHES "${pattern}")
    message(FATAL_ERROR "${why}")
  endif()
endfunction()
