#!/bin/bash
# The instruction-set copies of cpu_isa/ define no code outside their own
# namespaces (Note [Kernels per instruction set]). An inline function that an
# AVX-512 object emits out of line is one weak symbol with every other
# object's copy of it; the linker keeps one, and could hand the baseline copy,
# and every other caller, AVX-512 code that faults on a CPU without it.
# usage: test_isa_objects.sh OBJECT... (the zrt_kernels objects)
set -euo pipefail
checked=0
failed=0
for obj in "$@"; do
  case "$obj" in
    *_avx2.cpp.o) isa=avx2 ;;
    *_avx512.cpp.o) isa=avx512 ;;
    *) continue ;;
  esac
  checked=$((checked + 1))
  # Global code (T, weak W, indirect i) outside the copy's namespaces. Data
  # is left out: a constant is the same bytes in every copy (a sanitized
  # build emits inline constants as weak objects).
  outside=$(nm -C --defined-only "$obj" | awk '$2 ~ /^[TWi]$/ { $1 = ""; $2 = ""; print substr($0, 3) }' |
    grep -v -e "::$isa::" -e "zrt_eigen_$isa::" || true)
  if [ -n "$outside" ]; then
    echo "FAIL: $(basename "$obj") ($isa) defines symbols outside its namespace:"
    echo "$outside" | head -20 | sed 's/^/  /'
    failed=1
  fi
done
if [ "$checked" -lt 2 ]; then
  echo "FAIL: expected the avx2 and avx512 objects of cpu_isa/, found $checked"
  exit 1
fi
[ "$failed" = 0 ] && echo "$checked instruction-set objects define nothing outside their namespaces"
exit "$failed"
