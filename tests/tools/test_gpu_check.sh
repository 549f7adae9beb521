#!/usr/bin/env bash
# tools/gpu-check.sh on a machine without a GPU: exits 77 saying so, before it
# looks for a bundle or writes anything; with a GPU it is the device's job,
# and this test says so and passes. Also: gpu-bundle.sh and gpu-check.sh
# parse (bash -n), so a typo does not wait for a GPU to surface.
# usage: test_gpu_check.sh SOURCE-DIR
set -u
src=$1
fail() { echo "FAIL: $*"; exit 1; }
for script in gpu-bundle.sh gpu-check.sh; do
  bash -n "$src/tools/$script" || fail "tools/$script does not parse"
done
if gpus=$(nvidia-smi -L 2> /dev/null) && [ -n "$gpus" ]; then
  echo "ok   a GPU is here ($gpus): the no-GPU exit is not checked"
  exit 0
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=$(bash "$src/tools/gpu-check.sh" "$dir/no-bundle" "$dir/summary" 2>&1)
rc=$?
[ "$rc" = 77 ] || fail "exit code $rc, not 77: $out"
case $out in
  *"no GPU on this machine"*) ;;
  *) fail "no message saying there is no GPU: $out" ;;
esac
[ -e "$dir/summary" ] && fail "it wrote $dir/summary on a machine without a GPU"
echo "ok   without a GPU: exit 77, '$out'"
