#!/usr/bin/env bash
# Formats zrt's C++ and CUDA sources with clang-format (.clang-format), or
# with --check lists the files that differ from its output and exits 1
# (CI's format stage). Every *.h, *.cpp, *.cu and *.cuh file (git's tracked
# ones in a clone).
# usage: tools/format.sh [--check]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format > /dev/null || {
  echo "format: clang-format is not installed (Debian: apt-get install clang-format)" >&2
  exit 2
}
# The tracked sources in a git clone; elsewhere (an unpacked archive) every
# source outside the build, bundle and output folders.
if git rev-parse --show-toplevel 2> /dev/null | grep -qxF "$PWD"; then
  mapfile -t files < <(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh')
else
  mapfile -t files < <(find . \( -path './build*' -o -path './gpu-bundle' -o -path './out' -o -path './.git' \) \
    -prune -o -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) -print |
    sed 's|^\./||' | sort)
fi
[ ${#files[@]} -gt 0 ] || { echo "format: no C++ or CUDA source here"; exit 0; }
if [ "${1:-}" = --check ]; then
  # One clang-format for all files (one per file took 30 s): it names each
  # line that would change; any other failure is its own.
  rc=0
  out=$(clang-format --dry-run -Werror --style=file "${files[@]}" 2>&1) || rc=$?
  mapfile -t bad < <(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' <<<"$out" | sort -u)
  if [ $rc -ne 0 ] && [ ${#bad[@]} -eq 0 ]; then
    echo "format: clang-format failed: $out" >&2
    exit 2
  fi
  if [ ${#bad[@]} -gt 0 ]; then
    echo "format: ${#bad[@]} file(s) differ from clang-format's output (run tools/format.sh):" >&2
    printf '  %s\n' "${bad[@]}" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files formatted ($(clang-format --version | head -1))"
  exit 0
fi
[ $# -eq 0 ] || { echo "usage: $0 [--check]" >&2; exit 2; }
clang-format -i --style=file "${files[@]}"
