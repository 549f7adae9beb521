# Runs flight_fault (MODE skip or stall) on 3 ranks under mpirun and checks rank 0's
# flight-recorder report names rank 1 and where the others are.
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
execute_process(COMMAND ${MPIEXEC} --oversubscribe --allow-run-as-root -np ${NP} ${PROGRAM} ${DIR} ${MODE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
message("${out}${err}")
if(MODE STREQUAL "skip")
  set(want "report: rank 1 is past all_reduce #1 on world \\(nothing unfinished\\); ranks 0, 2 are in all_reduce #2 on world")
else()
  set(want "report: ranks 0-2 are in all_reduce #2 on world; rank 1 got there last, [2-4]\\.[0-9]+ s after rank")
endif()
if(NOT "${out}" MATCHES "${want}")
  message(FATAL_ERROR "no report matching /${want}/ (exit ${rc})")
endif()
if("${out}${err}" MATCHES "returned")
  message(FATAL_ERROR "a collective completed without rank 1")
endif()
