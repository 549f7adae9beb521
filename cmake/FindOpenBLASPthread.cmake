# Finds OpenBLAS's pthread build (Debian: libopenblas-pthread-dev), the only
# one safe to call from several threads at once (Note [CPU GEMM backends]).
# It sits in its own directory beside the other builds, so Debian's
# alternatives do not decide which one zrt links. Defines
# OpenBLASPthread_FOUND and the imported target OpenBLAS::pthread; the
# installed package finds it again on the consumer's machine instead of
# recording the build machine's path.
find_path(OPENBLAS_PTHREAD_INCLUDE_DIR cblas.h
  PATHS /usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-pthread NO_DEFAULT_PATH)
find_library(OPENBLAS_PTHREAD_LIBRARY NAMES openblas
  PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-pthread NO_DEFAULT_PATH)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(OpenBLASPthread
  REQUIRED_VARS OPENBLAS_PTHREAD_LIBRARY OPENBLAS_PTHREAD_INCLUDE_DIR)
if(OpenBLASPthread_FOUND AND NOT TARGET OpenBLAS::pthread)
  add_library(OpenBLAS::pthread UNKNOWN IMPORTED)
  set_target_properties(OpenBLAS::pthread PROPERTIES
    IMPORTED_LOCATION "${OPENBLAS_PTHREAD_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${OPENBLAS_PTHREAD_INCLUDE_DIR}")
endif()
mark_as_advanced(OPENBLAS_PTHREAD_INCLUDE_DIR OPENBLAS_PTHREAD_LIBRARY)
