# Finds NCCL's header and library: under NCCL_ROOT (CMake or environment), the
# CUDA toolkit (/usr/local/cuda), or a Python's NCCL wheel (nvidia/nccl, which
# ships only the versioned libnccl.so.2; ZRT_NCCL_PYTHON names that Python,
# python3 by default). Defines NCCL_FOUND and the imported target NCCL::nccl.
set(_zrt_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_ROOT} /usr/local/cuda)
if(NOT NCCL_LIBRARY OR NOT NCCL_INCLUDE_DIR)
  if(NOT ZRT_NCCL_PYTHON)
    find_program(ZRT_NCCL_PYTHON NAMES python3)
  endif()
  if(ZRT_NCCL_PYTHON)
    execute_process(
      COMMAND ${ZRT_NCCL_PYTHON} -c "import nvidia.nccl as n; print(list(n.__path__)[0])"
      OUTPUT_VARIABLE _zrt_nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _zrt_rc)
    if(_zrt_rc EQUAL 0 AND _zrt_nccl_wheel)
      list(APPEND _zrt_nccl_hints ${_zrt_nccl_wheel})
    endif()
  endif()
endif()
find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS ${_zrt_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS}
  PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR
  HINTS ${_zrt_nccl_hints}
  PATH_SUFFIXES lib lib64)
include(${CMAKE_CURRENT_LIST_DIR}/ZrtImportFound.cmake)
zrt_import_found(NCCL NCCL::nccl NCCL_LIBRARY NCCL_INCLUDE_DIR)
unset(_zrt_nccl_hints)
