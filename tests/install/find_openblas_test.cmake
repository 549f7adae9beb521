# cmake -DSOURCE_DIR= -DWORK= -DGENERATOR= -P find_openblas_test.cmake
# FindOpenBLASPthread finds an OpenBLAS under OpenBLAS_ROOT (CMake or
# environment variable) before Debian's, one on CMAKE_PREFIX_PATH where
# Debian's multiarch folders are not (Fedora's spelling: include/openblas/,
# libopenblasp), and Debian's pthread build where it is installed.
file(REMOVE_RECURSE ${WORK})
foreach(prefix root fedora)
  file(MAKE_DIRECTORY ${WORK}/${prefix}/lib)
endforeach()
file(WRITE ${WORK}/root/include/cblas.h "")
file(WRITE ${WORK}/root/lib/libopenblas.so "")
file(WRITE ${WORK}/fedora/include/openblas/cblas.h "")
file(WRITE ${WORK}/fedora/lib/libopenblasp.so "")
file(WRITE ${WORK}/fedora/lib/libopenblas.so "")

# expect_found(NAME LIBRARY INCLUDE_DIR [ENV VAR=VALUE] [CMAKE ARGS...])
function(expect_found name library include)
  cmake_parse_arguments(PARSE_ARGV 3 arg "" "ENV" "")
  execute_process(COMMAND ${CMAKE_COMMAND} -E env ${arg_ENV} ${CMAKE_COMMAND}
                          -S ${SOURCE_DIR}/tests/install/find_openblas -B ${WORK}/${name} -G ${GENERATOR}
                          -DZRT_SOURCE_DIR=${SOURCE_DIR} ${arg_UNPARSED_ARGUMENTS}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(want "found=TRUE library=${library} include=${include}")
  string(FIND "${out}" "${want}" at)
  if(NOT rc EQUAL 0 OR at EQUAL -1)
    message(FATAL_ERROR "${name}: expected\n  ${want}\ngot (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${name}: ${want}")
endfunction()

expect_found(root ${WORK}/root/lib/libopenblas.so ${WORK}/root/include
             -DLANGUAGES=CXX -DOpenBLAS_ROOT=${WORK}/root)
expect_found(root-env ${WORK}/root/lib/libopenblas.so ${WORK}/root/include
             ENV OpenBLAS_ROOT=${WORK}/root -DLANGUAGES=CXX)
expect_found(fedora ${WORK}/fedora/lib/libopenblasp.so ${WORK}/fedora/include/openblas
             -DLANGUAGES=NONE -DCMAKE_PREFIX_PATH=${WORK}/fedora)
# Debian's pthread build, where this machine has it.
set(debian /usr/lib/x86_64-linux-gnu/openblas-pthread)
if(EXISTS ${debian}/libopenblas.so)
  expect_found(debian ${debian}/libopenblas.so /usr/include/x86_64-linux-gnu/openblas-pthread
               -DLANGUAGES=CXX)
endif()
