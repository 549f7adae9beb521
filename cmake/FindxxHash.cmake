# Finds the xxHash library (Debian: libxxhash-dev).
# Defines xxHash_FOUND and the imported target xxHash::xxhash.
find_path(XXHASH_INCLUDE_DIR xxhash.h)
find_library(XXHASH_LIBRARY NAMES xxhash)
include(${CMAKE_CURRENT_LIST_DIR}/ZrtImportFound.cmake)
zrt_import_found(xxHash xxHash::xxhash XXHASH_LIBRARY XXHASH_INCLUDE_DIR)
