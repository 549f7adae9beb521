# cmake -DBUILD_DIR= -DSOURCE_DIR= -DWORK= -DGENERATOR= -DLIBRARY_TYPE= [-DMPIEXEC=]
#       [-DPRIVATE_PREFIXES=] -P consumer_test.cmake
# LIBRARY_TYPE: zrt_runtime's target type; PRIVATE_PREFIXES: the prefixes of
# CUDA, NCCL and MPI on this machine, which the consumer of shared libraries
# must not need (Note [Package of a CUDA build]).
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
# Shared libraries keep CUDA, NCCL, MPI and the rest private (Note [Package
# of a CUDA build]): the consumer configures in a view of this machine
# without them (their prefixes ignored, CUDAToolkit_ROOT nowhere, and Find
# modules that stop the configuration if anything looks for them), and its
# link line names only zrt's libraries of them.
set(private_libraries cudart cublas cublasLt nccl mpi mpi_cxx openblas xxhash)
set(view)
string(REPLACE "," ";" PRIVATE_PREFIXES "${PRIVATE_PREFIXES}")
if(LIBRARY_TYPE STREQUAL "SHARED_LIBRARY")
  file(MAKE_DIRECTORY ${WORK}/no-such-machine)
  foreach(pkg CUDAToolkit CUDA NCCL MPI OpenBLASPthread xxHash nlohmann_json)
    file(WRITE ${WORK}/no-such-machine/Find${pkg}.cmake
         "message(FATAL_ERROR \"the consumer of shared zrt libraries looked for ${pkg}\")\n")
  endforeach()
  set(view -DCMAKE_MODULE_PATH=${WORK}/no-such-machine "-DCMAKE_IGNORE_PREFIX_PATH=${PRIVATE_PREFIXES}"
           -DCUDAToolkit_ROOT=${WORK}/no-such-machine)
endif()
# -Wall -Wextra -Werror: zrt's headers and the examples (the README's code,
# tests/install/readme_excerpts.py) compile warning-free in a strict project.
run("configure the consumer" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples -B ${WORK}/build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${WORK}/prefix -DCMAKE_BUILD_TYPE=Release -DZRT_EXAMPLES_STRICT=ON ${view})
run("build the consumer" ${CMAKE_COMMAND} --build ${WORK}/build --verbose)
string(REGEX MATCH "[^\n]*-o zrt-example-regression[^\n]*" link_line "${out}")
if(NOT link_line)
  message(FATAL_ERROR "no link line of zrt-example-regression in the verbose build:\n${out}")
endif()
message(STATUS "the consumer's link line:\n${link_line}")
if(LIBRARY_TYPE STREQUAL "SHARED_LIBRARY")
  foreach(lib ${private_libraries})
    if(link_line MATCHES "(/lib|-l)${lib}([.]| |$)")
      message(FATAL_ERROR "the consumer of shared zrt libraries links ${lib}:\n${link_line}")
    endif()
  endforeach()
  if(link_line MATCHES "/usr/local/cuda")
    message(FATAL_ERROR "the consumer of shared zrt libraries links from /usr/local/cuda:\n${link_line}")
  endif()
  if(NOT link_line MATCHES "libzrt_runtime[.]so")
    message(FATAL_ERROR "the consumer does not link libzrt_runtime.so:\n${link_line}")
  endif()
endif()
# The component `cuda`: there for a CUDA build (which this machine can then
# compile for), an error naming the missing CUDA otherwise.
file(GLOB config ${WORK}/prefix/lib*/cmake/zrt/zrtConfig.cmake)
file(STRINGS ${config} with_cuda REGEX "^set[(]zrt_WITH_CUDA ")
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/cuda_component -B ${WORK}/cuda
                        -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${WORK}/prefix -DCMAKE_BUILD_TYPE=Release
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(with_cuda MATCHES "ON")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "find_package(zrt COMPONENTS cuda) failed for a CUDA build:\n${out}\n${err}")
  endif()
  run("build the consumer of zrt::cuda" ${CMAKE_COMMAND} --build ${WORK}/cuda)
  run("the consumer of zrt::cuda" ${WORK}/cuda/zrt-cuda-consumer)
  message(STATUS "zrt::cuda: ${out}")
elseif(rc EQUAL 0 OR NOT err MATCHES "zrt was built without CUDA")
  message(FATAL_ERROR "find_package(zrt COMPONENTS cuda) of a build without CUDA:\n${out}\n${err}")
endif()

# find_package(zrt) leaves the consumer's module path as it was: zrt's Find
# modules would otherwise answer the consumer's own find_package calls.
file(WRITE ${WORK}/module_path/CMakeLists.txt [=[
cmake_minimum_required(VERSION 3.25)
project(zrt_module_path LANGUAGES CXX)
set(CMAKE_MODULE_PATH /the/consumers/modules)
find_package(zrt 0.1 REQUIRED)
if(NOT CMAKE_MODULE_PATH STREQUAL "/the/consumers/modules")
  message(FATAL_ERROR "find_package(zrt) changed CMAKE_MODULE_PATH to ${CMAKE_MODULE_PATH}")
endif()
]=])
run("find_package(zrt) keeping the module path" ${CMAKE_COMMAND} -S ${WORK}/module_path
    -B ${WORK}/module_path/build -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${WORK}/prefix)

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
  # The installed zrt-ckpt finds zrt's libraries from its own run path.
  if(EXISTS ${WORK}/prefix/bin/zrt-ckpt)
    run("the installed zrt-ckpt" ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH
        ${WORK}/prefix/bin/zrt-ckpt verify ${WORK}/ckpt-${name})
  endif()
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
