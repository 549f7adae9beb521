# How zrt's targets are made: the include root, the build flags of zrt's own
# targets, and zrt_library() for the four libraries.

# --- the include root (docs/design.md, "Folders, libraries and includes") --
# Headers sit beside their sources in runtime/, kernels/, optim/ and
# model_zoo/, and every include spells them <zrt/LIBRARY/...>, as the
# installed package does (include/zrt/LIBRARY/...). The build tree's include
# root maps each library's name onto its source folder with a symbolic link,
# so only those four folders are reachable as zrt/...
set(ZRT_INCLUDE_ROOT ${PROJECT_BINARY_DIR}/include)
set(ZRT_LIBRARIES runtime kernels optim model_zoo)
file(MAKE_DIRECTORY ${ZRT_INCLUDE_ROOT}/zrt)
foreach(lib ${ZRT_LIBRARIES})
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${lib} ${ZRT_INCLUDE_ROOT}/zrt/${lib} SYMBOLIC)
endforeach()

# --- build flags of zrt's own targets (never exported) ----------------------
# zrt_build_flags: libraries and programs; zrt_test_flags: the test
# programs, which take AddressSanitizer without UBSan (UBSan would double
# the compile time of Boost.Test's macros; it still checks every zrt library
# and program the suites run). Both share zrt_warning_flags; the sanitizer
# options are each target's own, so no later -fsanitize= turns back on what
# a test's earlier -fno-sanitize= turned off.
add_library(zrt_warning_flags INTERFACE)
target_compile_options(zrt_warning_flags INTERFACE
  "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Wunused-parameter>")
# g++ 12 at -O3 reports overlapping memcpy inside std::string's own
# concatenation (GCC bug 105329), a false positive that -Werror would stop on.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(zrt_warning_flags INTERFACE "$<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>")
endif()
if(ZRT_WERROR)
  target_compile_options(zrt_warning_flags INTERFACE
    "$<$<COMPILE_LANGUAGE:CXX>:-Werror>" "$<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings>")
endif()

# zrt_sanitizer_flags(TARGET COMPILED): TARGET's sources compile with the
# sanitizers COMPILED and link with all of ZRT_SANITIZE (the runtimes the
# libraries it links need).
function(zrt_sanitizer_flags target compiled)
  if(NOT ZRT_SANITIZE)
    return()
  endif()
  if(compiled)
    target_compile_options(${target} INTERFACE
      "$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${compiled};-fno-omit-frame-pointer>")
  endif()
  if(compiled MATCHES "undefined")
    target_compile_options(${target} INTERFACE "$<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=undefined>")
  endif()
  target_link_options(${target} INTERFACE "-fsanitize=${ZRT_SANITIZE}")
endfunction()

add_library(zrt_build_flags INTERFACE)
target_link_libraries(zrt_build_flags INTERFACE zrt_warning_flags)
zrt_sanitizer_flags(zrt_build_flags "${ZRT_SANITIZE}")

add_library(zrt_test_flags INTERFACE)
target_link_libraries(zrt_test_flags INTERFACE zrt_warning_flags)
string(REPLACE "," ";" test_sanitizers "${ZRT_SANITIZE}")
list(REMOVE_ITEM test_sanitizers undefined)
list(JOIN test_sanitizers "," test_sanitizers)
zrt_sanitizer_flags(zrt_test_flags "${test_sanitizers}")
# Test helpers are spelled from the source root ("tests/...", "tools/...").
target_include_directories(zrt_test_flags INTERFACE ${PROJECT_SOURCE_DIR})
target_compile_definitions(zrt_test_flags INTERFACE ZRT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# zrt_o1_in_release: code whose own speed does not count (the test programs,
# Note [Test compile time] in tests/CMakeLists.txt, and the command-line
# programs' parsing and reporting; the zrt libraries they call keep -O3)
# compiles at -O1 in a Release build; later on the command line, it wins.
add_library(zrt_o1_in_release INTERFACE)
target_compile_options(zrt_o1_in_release INTERFACE "$<$<AND:$<CONFIG:Release>,$<COMPILE_LANGUAGE:CXX>>:-O1>")
target_link_libraries(zrt_test_flags INTERFACE zrt_o1_in_release)

# zrt_program(TARGET): a program of zrt's own (tools/, benchmarks).
function(zrt_program target)
  target_link_libraries(${target} PRIVATE zrt_build_flags)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR})
endfunction()

# zrt_library(NAME): the library zrt_NAME whose sources are the folder NAME/;
# exported as zrt::NAME, namespace zrt::NAME (runtime: zrt). Its public
# headers (*.h but the *_impl.h bodies; no CUDA-only .cuh) install under
# include/zrt/NAME/.
function(zrt_library name)
  set(target zrt_${name})
  add_library(${target} "")
  add_library(zrt::${name} ALIAS ${target})
  # Installed, a shared zrt library finds the others beside it and its
  # private dependencies (CUDA, NCCL, MPI) where it was linked against them
  # (Note [Package of a CUDA build]).
  # A shared library's ABI version is the package's (SameMinorVersion).
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name} INSTALL_RPATH "$ORIGIN"
                                             INSTALL_RPATH_USE_LINK_PATH ON
                                             VERSION ${PROJECT_VERSION}
                                             SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${ZRT_INCLUDE_ROOT}> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:zrt_build_flags>)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${name}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zrt/${name}
          FILES_MATCHING PATTERN "*.h" PATTERN "*_impl.h" EXCLUDE)
endfunction()

# zrt_private_dependency(TARGET DEFINITIONS D... LIBRARIES L...): what only
# zrt's own sources use (CUDA, cuBLAS, NCCL, MPI): linked and defined
# PRIVATE, so a shared zrt's package never names them (Note [Package of a
# CUDA build]); a static one's lists the libraries link-only, as it must. In
# the build tree the tests and tools, which call CUDA, MPI and NCCL
# themselves, see both through the library (BUILD_INTERFACE).
function(zrt_private_dependency target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "DEFINITIONS;LIBRARIES")
  target_compile_definitions(${target} PRIVATE ${arg_DEFINITIONS})
  target_link_libraries(${target} PRIVATE ${arg_LIBRARIES})
  foreach(item ${arg_DEFINITIONS})
    target_compile_definitions(${target} INTERFACE $<BUILD_INTERFACE:${item}>)
  endforeach()
  foreach(item ${arg_LIBRARIES})
    target_link_libraries(${target} INTERFACE $<BUILD_INTERFACE:${item}>)
  endforeach()
endfunction()
