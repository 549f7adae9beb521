#!/usr/bin/env bash
# Installs the Debian packages zrt needs (when missing) and builds it into
# build/ (ZRT_BUILD_DIR). What it installs and builds depends on the job:
#
#   train  (tools/zrt-run.sh) what zrt-train needs, and only zrt-train: no
#          MPI, no test libraries, no PyTorch; CUDA only where a GPU is
#          present (nvidia-smi lists one) or ZRT_CMAKE_ARGS asks for it.
#   test   (tools/zrt-test.sh) everything: MPI, Boost.Test, python3-torch for
#          the reference tests, clang-format for the format check; every
#          target, CUDA wherever nvcc is found.
#
# ZRT_CMAKE_ARGS adds configure arguments; --deps-only stops after the packages.
# usage: tools/setup.sh train|test [--deps-only]
set -euo pipefail
cd "$(dirname "$0")/.."
job=${1:-}
case $job in train | test) ;; *) echo "usage: $0 train|test [--deps-only]" >&2; exit 2 ;; esac

packages=(cmake ninja-build g++ libeigen3-dev libopenblas-pthread-dev libcli11-dev nlohmann-json3-dev libxxhash-dev)
if [ "$job" = test ]; then
  packages+=(make libboost-test-dev libopenmpi-dev openmpi-bin python3 python3-torch python3-numpy python3-matplotlib
             clang-format)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

[ "${2:-}" = --deps-only ] && exit 0

build=${ZRT_BUILD_DIR:-build}
args=()
if [ "$job" = test ]; then
  args+=(-DZRT_BUILD_TESTS=ON -DZRT_CUDA=AUTO)
  targets=()
elif [ ! -f "$build/CMakeCache.txt" ]; then
  # A first build for the main job: CUDA code only for a GPU that is there.
  if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
    args+=(-DZRT_CUDA=AUTO)
  else
    args+=(-DZRT_CUDA=OFF)
  fi
  targets=(--target zrt-train)
else
  targets=(--target zrt-train)
fi
# shellcheck disable=SC2086
cmake -S . -B "$build" -G Ninja "${args[@]}" ${ZRT_CMAKE_ARGS:-}
cmake --build "$build" -j "$(nproc)" "${targets[@]}"
