#!/usr/bin/env bash
# Set up (dependencies + build) and run the main job: zrt-train with its
# defaults trains the tiny GPT on the embedded dataset (extra flags pass through).
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup.sh train
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec "${ZRT_BUILD_DIR:-build}/tools/train/zrt-train" "$@"
