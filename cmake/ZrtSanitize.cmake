# ZRT_SANITIZE: every target built with sanitizers (tools/sanitize.sh).
#   address,undefined  AddressSanitizer + UndefinedBehaviorSanitizer; a UB report aborts
#   thread             ThreadSanitizer
# The installed package then needs the same -fsanitize flags in its users.
set(ZRT_SANITIZE "" CACHE STRING "Sanitizers for every target: address,undefined or thread (empty: none)")
if(ZRT_SANITIZE)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${ZRT_SANITIZE};-fno-omit-frame-pointer>")
  add_link_options("-fsanitize=${ZRT_SANITIZE}")
  if(ZRT_SANITIZE MATCHES "undefined")
    add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=undefined>")
  endif()
endif()

# For tests/: the test programs get AddressSanitizer without UBSan, which
# would double their compile time (Boost.Test's macros). UBSan still checks
# every zrt library and tool the suites run.
function(zrt_sanitize_tests)
  if(ZRT_SANITIZE MATCHES "undefined")
    add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize=undefined>")
  endif()
endfunction()

# After the targets exist:
# - Sanitizer builds compile at -O1 (tools/sanitize.sh): zrt_kernels' sources
#   that ask for -O3 (Note [Kernels per instruction set]) keep their other
#   flags but take -O1 too, which roughly halves their compile time under
#   the instrumentation and checks the same code.
# - g++ resolves target_clones functions (Note [CPU vector clones]) through
#   ifunc resolvers, which run while the program is still being relocated,
#   before the ThreadSanitizer runtime is initialised; with TSan's function
#   entry/exit hooks in them the program crashes before main. zrt_kernels
#   goes without those hooks: its memory accesses are still checked, its
#   frames are left out of report stacks.
function(zrt_sanitize_fixups)
  if(NOT ZRT_SANITIZE)
    return()
  endif()
  get_target_property(sources zrt_kernels SOURCES)
  get_target_property(dir zrt_kernels SOURCE_DIR)
  foreach(src IN LISTS sources)
    cmake_path(ABSOLUTE_PATH src BASE_DIRECTORY "${dir}")
    get_source_file_property(options "${src}" TARGET_DIRECTORY zrt_kernels COMPILE_OPTIONS)
    if(options)
      list(TRANSFORM options REPLACE "^-O[23s]$" "-O1")
      set_source_files_properties("${src}" TARGET_DIRECTORY zrt_kernels PROPERTIES COMPILE_OPTIONS "${options}")
    endif()
  endforeach()
  if(ZRT_SANITIZE MATCHES "thread")
    target_compile_options(zrt_kernels PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:--param=tsan-instrument-func-entry-exit=0>")
  endif()
endfunction()
