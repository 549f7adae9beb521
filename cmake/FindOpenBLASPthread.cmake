# Finds OpenBLAS's pthread build (Debian: libopenblas-pthread-dev), the only
# one safe to call from several threads at once (Note [CPU GEMM backends]).
# Debian keeps it in its own directory beside the other builds, so Debian's
# alternatives do not decide which one zrt links: that directory is searched
# first, after OpenBLAS_ROOT (CMake or environment: a prefix with include/
# and lib/). Elsewhere the usual search (CMAKE_PREFIX_PATH, the system
# folders; include/openblas/ as Fedora has it) takes libopenblasp (Fedora's
# pthread build) or libopenblas; a single-threaded library found this way is
# refused at run time (kernels/cpu_blas/openblas_gemm.cpp). Defines
# OpenBLASPthread_FOUND and the imported target OpenBLAS::pthread; the
# installed package of a static zrt finds it again on the consumer's machine
# instead of recording the build machine's path.
set(_zrt_openblas_roots ${OpenBLAS_ROOT} $ENV{OpenBLAS_ROOT})
find_path(OPENBLAS_PTHREAD_INCLUDE_DIR cblas.h
  HINTS ${_zrt_openblas_roots}
  PATHS /usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-pthread
  PATH_SUFFIXES include include/openblas NO_DEFAULT_PATH)
find_path(OPENBLAS_PTHREAD_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas)
find_library(OPENBLAS_PTHREAD_LIBRARY NAMES openblasp openblas NAMES_PER_DIR
  HINTS ${_zrt_openblas_roots}
  PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-pthread
  PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)
find_library(OPENBLAS_PTHREAD_LIBRARY NAMES openblasp openblas NAMES_PER_DIR)
unset(_zrt_openblas_roots)
include(${CMAKE_CURRENT_LIST_DIR}/ZrtImportFound.cmake)
zrt_import_found(OpenBLASPthread OpenBLAS::pthread OPENBLAS_PTHREAD_LIBRARY OPENBLAS_PTHREAD_INCLUDE_DIR)
