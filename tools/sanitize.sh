#!/usr/bin/env bash
# Builds the CPU code with AddressSanitizer + UndefinedBehaviorSanitizer into
# build-asan/ and runs the unit and mpi suites under them (soak excluded); any
# report fails the run. Leak checking is on for suites in one process and off
# for those launched by mpirun: OpenMPI keeps allocations in plugins it has
# unloaded by exit, which LeakSanitizer reports from unknown modules.
# usage: tools/sanitize.sh
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup.sh > /dev/null  # the Debian packages (and the regular build)
build=${ZRT_ASAN_BUILD_DIR:-build-asan}
cmake -S . -B "$build" -G Ninja -DZRT_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined"
cmake --build "$build" -j "$(nproc)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
with_mpirun="test_zrt_checkpoint|test_install_consumer|test_rank_killed"
ASAN_OPTIONS=detect_leaks=1 ctest --test-dir "$build" --output-on-failure -j "$(nproc)" -L unit -E "$with_mpirun"
ASAN_OPTIONS=detect_leaks=0 ctest --test-dir "$build" --output-on-failure -j "$(nproc)" -L mpi
ASAN_OPTIONS=detect_leaks=0 ctest --test-dir "$build" --output-on-failure -R test_zrt_checkpoint
