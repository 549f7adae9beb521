#!/usr/bin/env bash
# tools/gpu-check.sh on a machine without a GPU: exits 77 saying so, before it
# looks for a bundle or writes anything; with a GPU it is the device's job,
# and this test says so and passes. Also: gpu-bundle.sh and gpu-check.sh
# parse (bash -n), so a typo does not wait for a GPU to surface; and the
# sanitize and bench stages run end to end with stand-ins for nvidia-smi,
# compute-sanitizer, ncu and the bundle's programs (saved outputs of the real
# tools, tests/tools/gpu_report/): NCCL's probes leave test_comm_gpu's row a
# pass that says so, a zrt error fails its row, and the kernel table is
# written and summarised.
# usage: test_gpu_check.sh SOURCE-DIR [PYTHON]
set -u
src=$1 python=${2:-python3}
fail() { echo "FAIL: $*"; exit 1; }
for script in gpu-bundle.sh gpu-check.sh; do
  bash -n "$src/tools/$script" || fail "tools/$script does not parse"
done
if gpus=$(nvidia-smi -L 2> /dev/null) && [ -n "$gpus" ]; then
  echo "ok   a GPU is here ($gpus): the no-GPU exit and the stand-ins are not checked"
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

# Stand-ins: a GPU, the tools printing saved outputs, a bundle of programs that pass.
data=$src/tests/tools/gpu_report
mkdir -p "$dir/path" "$dir/bundle/bin" "$dir/bundle/scripts"
cp "$src/tools/gpu_report.py" "$dir/bundle/scripts/"
ln -s "$(command -v "$python")" "$dir/path/python3"
printf '#!/bin/sh\n[ "$1" = -L ] && echo "GPU 0: Stand-in GPU (UUID: GPU-0)" || echo 580.00\n' \
  > "$dir/path/nvidia-smi"
# compute-sanitizer --tool T PROGRAM ARGS: the program runs; its errors are the saved ones.
cat > "$dir/path/compute-sanitizer" << EOF
#!/bin/bash
shift 2
"\$@"; rc=\$?
case \$1 in
  */test_comm_gpu) cat "$data/sanitizer-nccl-probes.txt" ;;
  */test_op_registry_gpu) cat "$data/sanitizer-mixed.txt" ;;
  *) cat "$data/sanitizer-clean.txt" ;;
esac
exit \$rc
EOF
printf '#!/bin/sh\ncat "%s"\n' "$data/ncu-per-kernel.txt" > "$dir/path/ncu"
for p in test_tensor_gpu test_caching_allocator_gpu test_comm_gpu test_op_registry_gpu \
  test_nn_kernels_gpu test_engine_gpu zrt-train zrt-bench; do
  printf '#!/bin/sh\necho "%s: passed"\n' "$p" > "$dir/bundle/bin/$p"
done
printf 'import sys\nprint("no PyTorch here")\nsys.exit(77)\n' > "$dir/bundle/scripts/torch_gpt.py"
chmod +x "$dir/path/"* "$dir/bundle/bin/"*
out=$(PATH="$dir/path:$PATH" ZRT_GPU_CHECK_STAGES=sanitize,bench \
  bash "$src/tools/gpu-check.sh" "$dir/bundle" "$dir/summary" 2>&1)
rc=$?
[ "$rc" = 1 ] || fail "with a zrt error among the sanitizer's: exit $rc, not 1: $out"
expect_row() {  # expect_row STEP PATTERN: SUMMARY.md's row of STEP matches PATTERN
  local row
  row=$(grep -F "| $1 |" "$dir/summary/SUMMARY.md") || fail "no row '$1' in SUMMARY.md: $out"
  [[ $row == $2 ]] || fail "the row of '$1' is: $row"
}
expect_row "test_comm_gpu under compute-sanitizer memcheck" \
  "*| pass |*0 error(s) in zrt, 16 library-internal*"
expect_row "test_op_registry_gpu under compute-sanitizer racecheck" \
  "*| FAIL (exit 1) |*3 error(s) in zrt*"
expect_row "test_tensor_gpu under compute-sanitizer synccheck" \
  "*| pass |*0 error(s) in zrt, 0 library-internal*"
expect_row "ncu per-kernel device time, zrt-train gpt2-124m bf16, 2 steps" \
  "*| pass |*total kernel time 133.8 ms (2 steps)*"
table=$dir/summary/zrt-124m-bf16-per-kernel.txt
[[ $(head -1 "$table") == "zrt-train --device cuda --preset gpt2-124m"*"Stand-in GPU"* ]] ||
  fail "the kernel table's title: $(head -1 "$table")"
grep -q "attention_backward_kv_kernel" "$table" || fail "no kernels in the table: $(cat "$table")"
[ -s "$dir/summary/sanitizer/memcheck-test_comm_gpu.log" ] || fail "no memcheck log of test_comm_gpu"
echo "ok   with stand-ins: library-internal errors pass, zrt's fail, the kernel table is written"

# The budget (Note [A device call's budget]): suites that take 2 s each run
# side by side, a benchmark that hangs is stopped at what is left of a 14 s
# budget, the steps after it are skipped and say so, and SUMMARY.md holds the
# finished rows while the hung step still runs.
for p in test_tensor_gpu test_caching_allocator_gpu test_comm_gpu test_op_registry_gpu \
  test_nn_kernels_gpu test_engine_gpu; do
  printf '#!/bin/sh\nsleep 2\necho "%s: passed"\n' "$p" > "$dir/bundle/bin/$p"
done
printf '#!/bin/sh\nexec sleep 30\n' > "$dir/bundle/bin/zrt-bench"
rm -rf "$dir/summary"
t0=$SECONDS
PATH="$dir/path:$PATH" ZRT_GPU_CHECK_STAGES=suites,bench ZRT_GPU_CHECK_BUDGET=14 \
  bash "$src/tools/gpu-check.sh" "$dir/bundle" "$dir/summary" > "$dir/budget.out" 2>&1 &
pid=$!
sleep 7
mid=$(cat "$dir/summary/SUMMARY.md" 2> /dev/null)
wait $pid
rc=$?
wall=$((SECONDS - t0))
out=$(cat "$dir/budget.out")
[ "$rc" = 1 ] || fail "with a benchmark stopped at the budget: exit $rc, not 1: $out"
[ "$wall" -le 20 ] || fail "a 14 s budget took $wall s: $out"
[[ $mid == *"| test_engine_gpu | pass |"* ]] ||
  fail "SUMMARY.md 7 s in, while a step still ran, lacks the suites' rows: $mid"
for s in test_tensor_gpu test_comm_gpu test_engine_gpu; do expect_row "$s" "*| pass |*"; done
expect_row "zrt-bench attention gpt2-124m layer bf16, cuda" "*| FAIL (over 1[0-3] s) |*"
expect_row "zrt-bench train gpt2-124m bf16, attention flash, cuda" \
  "*| skipped | 0 | no time left of the 14 s budget |"
expect_row "zrt-bench optim, cuda" "*| skipped | 0 | no time left of the 14 s budget |"
grep -q "step(s) skipped: no time left of the budget" "$dir/summary/SUMMARY.md" ||
  fail "SUMMARY.md does not say steps were skipped: $(cat "$dir/summary/SUMMARY.md")"
echo "ok   a 14 s budget: suites side by side, a hung benchmark stopped, the rest skipped ($wall s)"

# A suite that hangs holds back no other suite's row.
printf '#!/bin/sh\nexec sleep 30\n' > "$dir/bundle/bin/test_comm_gpu"
rm -rf "$dir/summary"
PATH="$dir/path:$PATH" ZRT_GPU_CHECK_STAGES=suites ZRT_GPU_CHECK_BUDGET=12 \
  bash "$src/tools/gpu-check.sh" "$dir/bundle" "$dir/summary" > "$dir/hung.out" 2>&1 &
pid=$!
sleep 6
mid=$(cat "$dir/summary/SUMMARY.md" 2> /dev/null)
wait $pid
[[ $mid == *"| test_engine_gpu | pass |"* && $mid != *"| test_comm_gpu |"* ]] ||
  fail "SUMMARY.md 6 s in, with test_comm_gpu hung, lacks the finished suites' rows: $mid"
expect_row test_comm_gpu "*| FAIL (over 1[0-2] s) |*"
echo "ok   a hung suite holds back no other suite's row"

out=$(PATH="$dir/path:$PATH" ZRT_GPU_CHECK_BUDGET=ten bash "$src/tools/gpu-check.sh" "$dir/bundle" 2>&1)
rc=$?
[ "$rc" = 2 ] && [[ $out == *"ZRT_GPU_CHECK_BUDGET=ten is not a whole number of seconds"* ]] ||
  fail "a budget of 'ten': exit $rc, '$out'"
echo "ok   a budget that is not a number: exit 2, '$out'"

# Stages run in the order they are listed; a name that is no stage is refused.
printf '#!/bin/sh\necho "zrt-bench: passed"\n' > "$dir/bundle/bin/zrt-bench"
for p in test_tensor_gpu test_caching_allocator_gpu test_comm_gpu test_op_registry_gpu \
  test_nn_kernels_gpu test_engine_gpu; do
  printf '#!/bin/sh\necho "%s: passed"\n' "$p" > "$dir/bundle/bin/$p"
done
rm -rf "$dir/summary"
out=$(PATH="$dir/path:$PATH" ZRT_GPU_CHECK_STAGES=bench,suites \
  bash "$src/tools/gpu-check.sh" "$dir/bundle" "$dir/summary" 2>&1)
rc=$?
[ "$rc" = 0 ] || fail "stages bench,suites with passing stand-ins: exit $rc: $out"
first=$(grep -n "| zrt-bench optim, cuda |" "$dir/summary/SUMMARY.md" | cut -d: -f1)
suite=$(grep -n "| test_tensor_gpu |" "$dir/summary/SUMMARY.md" | cut -d: -f1)
[ -n "$first" ] && [ -n "$suite" ] && [ "$first" -lt "$suite" ] ||
  fail "bench,suites did not run the bench stage first: $(cat "$dir/summary/SUMMARY.md")"
echo "ok   stages run in the order listed (bench, then suites)"
out=$(PATH="$dir/path:$PATH" ZRT_GPU_CHECK_STAGES=suites,benchmark bash "$src/tools/gpu-check.sh" \
  "$dir/bundle" 2>&1)
rc=$?
[ "$rc" = 2 ] && [[ $out == *"names 'benchmark', which is not a stage"* ]] ||
  fail "a stage named 'benchmark': exit $rc, '$out'"
echo "ok   an unknown stage: exit 2, '$out'"
