# cmake -DBUILD_DIR= -DSOURCE_DIR= -DWORK= -DGENERATOR= [-DMPIEXEC=] -P consumer_test.cmake
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK})
run("configure zrt as a subproject" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/subproject -B ${WORK}/subproject
    -G ${GENERATOR} -DZRT_SOURCE_DIR=${SOURCE_DIR} -DZRT_CUDA=OFF)
run("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK}/prefix)
foreach(header zrt/optim/zero_module.h zrt/optim/checkpoint/module_checkpoint.h zrt/runtime/tensor.h
               zrt/kernels/ops/adamw.h)
  if(NOT EXISTS ${WORK}/prefix/include/${header})
    message(FATAL_ERROR "the install lacks include/${header}")
  endif()
endforeach()
# Only public headers: no *_impl.h bodies, no CUDA-only .cuh.
file(GLOB_RECURSE private_headers ${WORK}/prefix/include/zrt/*_impl.h ${WORK}/prefix/include/zrt/*.cuh)
if(private_headers)
  message(FATAL_ERROR "the install has headers a consumer cannot use: ${private_headers}")
endif()
# The exported targets name no path of the build machine's libraries (the
# package finds them again) and the consumer's project enables CXX only
# (examples/CMakeLists.txt; C++20 comes from the targets).
file(GLOB exports ${WORK}/prefix/lib*/cmake/zrt/zrtTargets*.cmake)
foreach(f ${exports})
  file(READ ${f} text)
  if(text MATCHES "openblas-pthread/lib")
    message(FATAL_ERROR "${f} hard-codes an OpenBLAS path")
  endif()
endforeach()
# -Wall -Wextra -Werror: zrt's headers and the examples (the README's code,
# tests/install/readme_excerpts.py) compile warning-free in a strict project.
run("configure the consumer" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples -B ${WORK}/build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${WORK}/prefix -DCMAKE_BUILD_TYPE=Release -DZRT_EXAMPLES_STRICT=ON)
run("build the consumer" ${CMAKE_COMMAND} --build ${WORK}/build)
file(READ ${WORK}/build/CMakeCache.txt cache)
if(cache MATCHES "CMAKE_C_COMPILER:")
  message(FATAL_ERROR "find_package(zrt) enabled the C language in the consumer's project")
endif()
if(NOT EXISTS ${WORK}/build/zrt-example-layers)
  message(FATAL_ERROR "the consumer's build made no zrt-example-layers")
endif()
if(MPIEXEC)
  set(two_ranks ${MPIEXEC} --oversubscribe --allow-run-as-root -np 2)
endif()

# The loss of the last step (99) and of the first that `out` prints, into
# `last` and `first` (the "step  99  loss X" line and X).
function(losses out what)
  string(REGEX MATCH "step  99  loss [0-9.]+" line "${out}")
  string(REGEX MATCH "step +[0-9]+  loss [0-9.]+" first "${out}")
  if(NOT line OR NOT first)
    message(FATAL_ERROR "${what} printed no losses:\n${out}")
  endif()
  string(REGEX REPLACE ".* " "" last "${line}")
  string(REGEX REPLACE ".* " "" first "${first}")
  set(last ${last} PARENT_SCOPE)
  set(first ${first} PARENT_SCOPE)
endfunction()
# Two final losses (6 decimals) agree within `ulps` millionths.
function(expect_same_loss what la lb ulps)
  string(REPLACE "." "" ma "${la}")
  string(REPLACE "." "" mb "${lb}")
  string(REGEX REPLACE "^0+([0-9])" "\\1" ma "${ma}")
  string(REGEX REPLACE "^0+([0-9])" "\\1" mb "${mb}")
  math(EXPR diff "${ma} - ${mb}")
  if(diff GREATER ${ulps} OR diff LESS -${ulps})
    message(FATAL_ERROR "${what}: final loss ${la} against ${lb} (tolerance ${ulps}e-6)")
  endif()
endfunction()

# Each example, with its arguments `args` and the tolerance (millionths) of
# its final loss across rank counts: it learns in fp32 and bf16; a checkpoint
# saved after step 49 (on 2 ranks when MPI is there) and resumed on one
# process ends at the uninterrupted run's loss; 2 ranks print the same losses.
function(check_example name ulps)
  set(program ${WORK}/build/zrt-example-${name})
  run("${name}, one process" ${program} ${ARGN})
  message(STATUS "${name}, one process:\n${out}")
  losses("${out}" "${name}")
  set(one ${last})
  if(NOT one LESS first)
    message(FATAL_ERROR "${name} did not learn: loss ${first} -> ${one}")
  endif()
  run("${name} in bf16" ${program} ${ARGN} --dtype bf16)
  message(STATUS "${name}, bf16:\n${out}")
  losses("${out}" "${name} in bf16")
  if(NOT last LESS first)
    message(FATAL_ERROR "${name} did not learn in bf16: loss ${first} -> ${last}")
  endif()
  # Every stream mode of a CPU module (Note [Streams of a CPU module]) gives
  # the same losses: the examples pass no stream, and their scopes order the
  # calling thread (Note [The stream a scope serves]); every block poisoned.
  foreach(streams none all)
    run("${name} with ZRT_CPU_STREAMS=${streams}" ${CMAKE_COMMAND} -E env ZRT_CPU_STREAMS=${streams}
        ZRT_POISON_MEMORY=1 ${program} ${ARGN})
    losses("${out}" "${name} with ZRT_CPU_STREAMS=${streams}")
    expect_same_loss("${name} with ZRT_CPU_STREAMS=${streams}" ${one} ${last} 0)
  endforeach()
  run("${name} saving a checkpoint" ${two_ranks} ${program} ${ARGN}
      --checkpoint-dir ${WORK}/ckpt-${name} --save-at 49)
  run("${name} resuming it" ${program} ${ARGN} --checkpoint-dir ${WORK}/ckpt-${name} --resume)
  message(STATUS "${name}, resumed:\n${out}")
  if(NOT out MATCHES "resumed at step 50")
    message(FATAL_ERROR "${name} did not resume at step 50:\n${out}")
  endif()
  losses("${out}" "${name} resumed")
  expect_same_loss("${name} resumed from a checkpoint" ${one} ${last} ${ulps})
  if(MPIEXEC)
    run("${name} under mpirun -np 2" ${two_ranks} ${program} ${ARGN})
    message(STATUS "${name}, mpirun -np 2:\n${out}")
    losses("${out}" "${name} under mpirun -np 2")
    # The same global batch and update.
    expect_same_loss("${name}: 1 process against 2 ranks" ${one} ${last} ${ulps})
  endif()
endfunction()
check_example(regression 2)
check_example(layers 5 --micro-batches 2)
