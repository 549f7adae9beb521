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
include(${CMAKE_CURRENT_LIST_DIR}/ZrtImportFound.cmake)
zrt_import_found(OpenBLASPthread OpenBLAS::pthread OPENBLAS_PTHREAD_LIBRARY OPENBLAS_PTHREAD_INCLUDE_DIR)
