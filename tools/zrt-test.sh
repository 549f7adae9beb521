#!/usr/bin/env bash
# Set up (dependencies + build) and run every test suite. gpu suites report
# SKIPPED on machines without a CUDA device.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup.sh test
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir "${ZRT_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" -LE soak "$@"
