#!/usr/bin/env bash
# Installs zrt's Debian dependencies (when missing) and builds it into build/.
# ZRT_BUILD_DIR and ZRT_CMAKE_ARGS override the defaults; --deps-only stops
# after the packages.
# usage: tools/setup.sh [--deps-only]
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ make libeigen3-dev libopenblas-pthread-dev libboost-test-dev libopenmpi-dev openmpi-bin
          libcli11-dev nlohmann-json3-dev libxxhash-dev python3 python3-torch python3-numpy python3-matplotlib)
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

[ "${1:-}" = --deps-only ] && exit 0

build=${ZRT_BUILD_DIR:-build}
# shellcheck disable=SC2086
cmake -S . -B "$build" -G Ninja ${ZRT_CMAKE_ARGS:-}
cmake --build "$build" -j "$(nproc)"
