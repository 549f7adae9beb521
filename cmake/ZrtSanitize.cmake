# ZRT_SANITIZE: zrt's own targets built with sanitizers (tools/sanitize.sh).
#   address,undefined  AddressSanitizer + UndefinedBehaviorSanitizer; a UB report aborts
#   thread             ThreadSanitizer
# The flags are target flags (zrt_build_flags, zrt_test_flags in
# ZrtLibrary.cmake), never global options; a consumer of a sanitized
# package links with the same -fsanitize flags.
set(ZRT_SANITIZE "" CACHE STRING "Sanitizers for zrt's targets: address,undefined or thread (empty: none)")

# The optimisation level of the sources that ask for their own (the kernels'
# CPU twins, Note [Kernels per instruction set]): -O3, or -O1 under the
# sanitizers, which roughly halves their compile time under the
# instrumentation and checks the same code.
if(ZRT_SANITIZE)
  set(ZRT_KERNEL_OPT -O1)
else()
  set(ZRT_KERNEL_OPT -O3)
endif()
