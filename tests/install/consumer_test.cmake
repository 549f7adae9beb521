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
run("configure the consumer" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples -B ${WORK}/build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${WORK}/prefix -DCMAKE_BUILD_TYPE=Release ${view})
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

file(READ ${WORK}/build/CMakeCache.txt cache)
if(cache MATCHES "CMAKE_C_COMPILER:")
  message(FATAL_ERROR "find_package(zrt) enabled the C language in the consumer's project")
endif()
run("the example, one process" ${WORK}/build/zrt-example-regression)
message(STATUS "one process:\n${out}")
string(REGEX MATCH "step  99  loss [0-9.]+" one "${out}")
string(REGEX MATCH "step   0  loss [0-9.]+" first "${out}")
if(NOT one OR NOT first)
  message(FATAL_ERROR "the example printed no losses:\n${out}")
endif()
string(REGEX REPLACE ".* " "" l0 "${first}")
string(REGEX REPLACE ".* " "" l99 "${one}")
if(NOT l99 LESS l0)
  message(FATAL_ERROR "the example did not learn: loss ${l0} -> ${l99}")
endif()
# bf16 compute: the same program learns.
run("the example in bf16" ${WORK}/build/zrt-example-regression --dtype bf16)
message(STATUS "bf16:\n${out}")
string(REGEX MATCH "step  99  loss [0-9.]+" bf "${out}")
string(REGEX REPLACE ".* " "" lbf "${bf}")
if(NOT bf OR NOT lbf LESS l0)
  message(FATAL_ERROR "the example did not learn in bf16:\n${out}")
endif()

# Checkpoint after step 49 (on 2 ranks when MPI is there), resume on one
# process: the final loss is the uninterrupted run's.
if(MPIEXEC)
  set(saver ${MPIEXEC} --oversubscribe --allow-run-as-root -np 2)
endif()
run("the example saving a checkpoint" ${saver} ${WORK}/build/zrt-example-regression
    --checkpoint-dir ${WORK}/ckpt --save-at 49)
# The installed zrt-ckpt finds zrt's libraries from its own run path.
if(EXISTS ${WORK}/prefix/bin/zrt-ckpt)
  run("the installed zrt-ckpt" ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH
      ${WORK}/prefix/bin/zrt-ckpt verify ${WORK}/ckpt)
endif()
run("the example resuming it" ${WORK}/build/zrt-example-regression --checkpoint-dir ${WORK}/ckpt --resume)
message(STATUS "resumed:\n${out}")
string(REGEX MATCH "step  99  loss [0-9.]+" resumed "${out}")
if(NOT out MATCHES "resumed at step 50" OR NOT resumed)
  message(FATAL_ERROR "the resumed example printed no final loss:\n${out}")
endif()
# Two "step  99  loss X" lines whose losses (6 decimals) agree within 2e-6.
function(expect_same_loss what a b)
  string(REGEX REPLACE ".* " "" la "${a}")
  string(REGEX REPLACE ".* " "" lb "${b}")
  string(REPLACE "." "" ma "${la}")
  string(REPLACE "." "" mb "${lb}")
  string(REGEX REPLACE "^0+([0-9])" "\\1" ma "${ma}")
  string(REGEX REPLACE "^0+([0-9])" "\\1" mb "${mb}")
  math(EXPR diff "${ma} - ${mb}")
  if(diff GREATER 2 OR diff LESS -2)
    message(FATAL_ERROR "${what}: final loss ${la} against ${lb}")
  endif()
endfunction()
expect_same_loss("resumed from a checkpoint" "${one}" "${resumed}")

if(MPIEXEC)
  run("the example under mpirun -np 2" ${MPIEXEC} --oversubscribe --allow-run-as-root -np 2
      ${WORK}/build/zrt-example-regression)
  message(STATUS "mpirun -np 2:\n${out}")
  string(REGEX MATCH "step  99  loss [0-9.]+" two "${out}")
  if(NOT two)
    message(FATAL_ERROR "mpirun -np 2 printed no final loss:\n${out}")
  endif()
  # The same global batch and update.
  expect_same_loss("1 process against 2 ranks" "${one}" "${two}")
endif()
