#!/usr/bin/env bash
# Set up (dependencies + build) and run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup.sh
build=${ZRT_BUILD_DIR:-build}
if [ -x "$build/tools/train/zrt-train" ]; then
  exec "$build/tools/train/zrt-train" "$@"
fi
echo "zrt-train is not built yet; running the unit tests instead" >&2
exec ctest --test-dir "$build" -L unit --output-on-failure
